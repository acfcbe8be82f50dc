"""The campaign loop (DESIGN §11): :func:`~crowdbudget.engine.loop.drive`."""

from crowdbudget.engine.loop import CheckpointRecorder, Clock, Recorder, drive

__all__ = ["CheckpointRecorder", "Clock", "Recorder", "drive"]
