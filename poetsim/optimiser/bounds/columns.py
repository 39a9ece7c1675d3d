"""The kinds of the eviction cover's columns (`cover_model`), named for what each says."""

from enum import StrEnum


class Col(StrEnum):
    """The kinds of the cover's columns, by the item of the argument that brings them."""

    RECOMPUTED = "R"  # x^R_i: i is ever recomputed (item 2)
    PAGED = "P"  # x^P_i: i is ever paged back in (item 2)
    ABSENT = "a"  # a_{t,i}: absent at t, ended by a recomputation that needs a dead input (item 5)
    ABSENT_PAGED = "ap"  # ap_{t,i}: an output of `either` absent at t, ended by a page-in (item 5)
    HELD = "h"  # h_{t,d}: a dead input held at t for a cascade (item 5)
    REBUILT = "r"  # r_{t,d}: a dead input absent at t and recomputed after it (item 5)
    OUT_LEVEL = "z"  # z_{i,k}: i's first absence by paging is in page-out stall level k (item 6)
    PAIR = "w"  # w_{i,k,l}: i paged with page-out level k and page-in level l (item 6)
    PAGED_BACK = "q"  # q_{t,d}: a dead input paged back in for row t's cascade (item 6)
    CASCADE_STALL = "s"  # s_d: the stall of d's page-in for a cascade (item 6)
    LIVE_ABSENT = "p"  # p_{t,d}: a live input of a recomputation absent at t by paging (item 6)
    LIVE_STALL = "sl"  # sl_d: the stall of that input's page-in (item 6)
    PAGED_AT = "pa"  # pa_{t,i}: i absent at row t by paging, its page-out before t (item 6)
    BEYOND = "Y"  # Y: the time beyond one plain pass (item 6)
    SLACK = "e"  # e_t: the shortfall of row t's covering row (the elastic check of a choice)
    ABSENT_ONCE = "b"  # b_{t,i}: i absent at row t alone (item 7)
    READ = "n"  # n_{t,o,J}: o is read in stages t+1..J (item 7)
    ABSENT_AGAIN = "y"  # y_{o,J}: o is absent at some row from J on (item 7)
    TWICE = "x2"  # x2_o: o is recomputed a second time (item 7)
