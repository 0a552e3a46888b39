"""`scripts/cluster`'s refusals, which start nothing (the cluster itself: test_cluster.py)."""

import pytest

from deploy import cluster


def test_a_folder_that_is_not_a_clusters_is_never_emptied(tmp_path, capsys):
    (tmp_path / "precious").write_text("keep me")
    assert cluster.main(["up", "--data-dir", str(tmp_path)]) == 1
    assert (tmp_path / "precious").read_text() == "keep me"
    assert "not a cluster's folder" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--web", "--replicas"])
def test_at_least_one_web_worker_and_one_replica(option):
    with pytest.raises(SystemExit):
        cluster.main(["up", option, "0"])


def test_replicas_get_cores_of_their_own_when_there_are_enough(monkeypatch):
    monkeypatch.setattr(cluster.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert [cluster._cores_of_replica(n, 2) for n in (1, 2)] == [{"VLLM_CPU_OMP_THREADS_BIND": "0,2"}, {"VLLM_CPU_OMP_THREADS_BIND": "1,3"}]
    assert cluster._cores_of_replica(1, 1) == {}
    assert [cluster._cores_of_replica(n, 6)["VLLM_CPU_OMP_THREADS_BIND"] for n in (5, 6)] == ["0", "1"]  # more replicas than cores
