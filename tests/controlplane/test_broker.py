"""The embedded default's broker (controlplane.broker): a worker scanning the queue while a
message is written never takes it half written, and the message arrives whole."""

import inspect
from queue import Empty

import pytest
from django.conf import settings
from kombu import Connection

from controlplane import broker
from controlplane.celery import app


def channel(folder, transport=broker.Transport):
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "store_processed": False}
    return Connection("filesystem://", transport=transport, transport_options=options).channel()


def test_a_message_is_invisible_to_a_worker_until_it_is_written_whole(tmp_path, monkeypatch):
    writer, worker = channel(tmp_path), channel(tmp_path)
    module = inspect.getmodule(type(writer)._put)
    dumps, seen_meanwhile = module.dumps, []

    def encode_while_a_worker_scans(payload):
        # the moment between the message's file being opened and its bytes written
        try:
            seen_meanwhile.append(worker._get("celery"))
        except Empty:
            pass
        return dumps(payload)

    monkeypatch.setattr(module, "dumps", encode_while_a_worker_scans)  # kombu's own: JSONDecodeError on the empty file
    writer._put("celery", {"body": "a task", "n": 1})
    assert seen_meanwhile == []
    assert worker._get("celery") == {"body": "a task", "n": 1}
    assert list(tmp_path.iterdir()) == []  # nothing partial left behind
    with pytest.raises(Empty):
        worker._get("celery")


def test_every_message_arrives_once_and_only_in_its_queue(tmp_path):
    writer, worker = channel(tmp_path), channel(tmp_path)
    for n in range(5):
        writer._put("celery", {"n": n})
    writer._put("aside", {"n": "other"})
    assert sorted(worker._get("celery")["n"] for _ in range(5)) == [0, 1, 2, 3, 4]  # oldest millisecond first, as kombu's
    with pytest.raises(Empty):
        worker._get("celery")
    assert worker._get("aside") == {"n": "other"}


def test_the_embedded_default_uses_it():
    transport = app.connection_for_write().transport_cls
    if settings.CELERY_BROKER_URL.startswith("filesystem"):
        assert transport == "controlplane.broker:Transport"
    else:
        assert transport != "controlplane.broker:Transport"
