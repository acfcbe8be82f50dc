"""Connections to the labeling tools teams already run (Label Studio: :mod:`.labelstudio`)."""
