"""Training graphs: the graph record, the layer builder, the model zoo and graph files."""
