"""Decoder backends behind the VideoReader interface (imported lazily by ``open_video``)."""
