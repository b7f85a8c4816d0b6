"""While a long pass runs, the daemon's status file, ``/status``, systemd ``STATUS=``
and its metrics show the items done / to do and the queue depth — not only once it ended."""

from __future__ import annotations

import re
from pathlib import Path

from support.daemon_proc import DaemonProc, NotifyListener, token, write_daemon_config

N_FILES = 150


def test_status_shows_progress_while_a_pass_runs(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "docs").mkdir(parents=True)
    for i in range(N_FILES):
        (root / "docs" / f"d{i:03}.txt").write_text(f"document {i} du dossier {token(i)}", encoding="utf-8")
    cfg = write_daemon_config(tmp_path)
    listener = NotifyListener()
    d = DaemonProc(cfg, env={"NOTIFY_SOCKET": listener.name}).start()
    try:
        def running() -> dict | None:
            st = d.status()
            cur = st and st.get("current")
            if cur and cur["total"] == N_FILES and 0 < cur["done"] < N_FILES:
                return st
            return None

        st = d.wait_for(running, "a status file written during the startup pass", timeout=180, every=0.01)
        cur = st["current"]
        assert (cur["source"], cur["trigger"], cur["scope"]) == ("t", "startup", "full")
        assert cur["to_do"] == N_FILES - cur["done"] and cur["path"].startswith("docs/d")
        assert isinstance(st["queue_depth"], int)
        assert "last_full" not in st["sources"].get("t", {})  # the pass has not ended yet
        assert "current" in d._get("/v1/status")["daemon"]  # the control socket serves the same status

        seen_live = d.wait_for(
            lambda: [f for f in listener.fields() if re.search(r"startup pass of t: \d+/150 done, \d+ to do; .*queue \d+", f)],
            "a STATUS= line with the pass's progress", timeout=60,
        )
        assert seen_live[0].startswith("STATUS=running; startup pass of t:")

        final = d.wait_idle(timeout=300)
        assert final["current"] is None and final["sources"]["t"]["last_full"]["new"] == N_FILES
        metrics = d.metrics()
        assert 'ancre_sync_documents_todo{source="t"} 0.0' in metrics  # reset once the pass ended
        assert "ancre_sync_documents_done" in metrics
    finally:
        d.stop()
        listener.close()


def test_progress_gauges_follow_the_engine() -> None:
    from ancre.daemon.metrics import DaemonMetrics

    m = DaemonMetrics()
    m.progress("partage", 40, 100)
    assert m.docs_done.labels("partage")._value.get() == 40
    assert m.docs_todo.labels("partage")._value.get() == 60
    m.progress("partage", 0, 0)
    assert m.docs_todo.labels("partage")._value.get() == 0
