"""Reading Vega-Lite specs in tests: encodings of a channel, and the layers whose axes Vega merges."""

import json


def encodings(spec, channel: str) -> list[dict]:
    """Every encoding of `channel` in a spec, nested charts included."""
    found = []
    if isinstance(spec, dict):
        if channel in spec.get("encoding", {}):
            found.append(spec["encoding"][channel])
        for value in spec.values():
            found += encodings(value, channel)
    elif isinstance(spec, list):
        for value in spec:
            found += encodings(value, channel)
    return found


def layers_with_other_axes(spec, path: str = "") -> list[str]:
    """Where a layered chart's layers encode x or y from data with different axes.

    Vega-Lite merges the axes of a layered chart's layers: a layer left at the default axis can
    overrule the others' settings (Vega then drops every other tick label, say). Each entry names
    the layer chart and the channel.
    """
    found = []
    if isinstance(spec, dict):
        for channel in ("x", "y") if "layer" in spec else ():
            axes = {
                json.dumps(enc.get("axis"), sort_keys=True)
                for layer in spec["layer"]
                if isinstance(enc := layer.get("encoding", {}).get(channel), dict) and ("field" in enc or "datum" in enc)
            }
            if len(axes) > 1:
                found.append(f"{path} {channel}")
        for key, value in spec.items():
            found += layers_with_other_axes(value, f"{path}/{key}")
    elif isinstance(spec, list):
        for n, value in enumerate(spec):
            found += layers_with_other_axes(value, f"{path}[{n}]")
    return found
