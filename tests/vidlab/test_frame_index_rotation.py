"""A rotated video's frame-index identity records how its frames were shown (180 degrees keeps w and h)."""

from __future__ import annotations

import av

from vidlab.clip.frame_index import video_content_id
from vidlab.video import open_video
from vidlab.video.synth import render_synthetic


def test_content_id_depends_on_display_orientation(tmp_path):
    base, rot = tmp_path / "up.mp4", tmp_path / "rot180.mp4"
    render_synthetic(base, 8, width=64, height=48, gop=4)
    with av.open(str(base)) as ic, av.open(str(rot), "w") as oc:
        ost = oc.add_stream_from_template(ic.streams.video[0])
        ost.set_display_rotation(180)
        for pkt in ic.demux(ic.streams.video[0]):
            if pkt.dts is not None:
                pkt.stream = ost
                oc.mux(pkt)
    with open_video(rot) as shown, open_video(rot, rotate=False) as coded:
        assert (shown.width, shown.height) == (coded.width, coded.height) == (64, 48)
        assert video_content_id(rot, shown) != video_content_id(rot, coded)
    with open_video(base) as r:  # unrotated files keep the identity they had before this change
        from vidlab.identity import file_fingerprint

        old = {"frames": r.num_frames, "fps": round(float(r.fps), 6), "w": r.width, "h": r.height}
        assert video_content_id(base, r) == file_fingerprint(base, extra=old)
