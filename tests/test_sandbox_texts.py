"""What a session says when its sandbox cannot be reached: with `--sandbox container:NAME`
the user's own container is named, with what to check, and no fresh sandbox is promised."""

from __future__ import annotations

from tempi.workflows.session.texts import sandbox_host_gone, sandbox_unavailable


def test_a_lost_host_of_the_users_container_names_it_and_promises_no_fresh_sandbox() -> None:
    text = sandbox_host_gone(3, container="mom-sandbox")
    assert "mom-sandbox" in text
    assert "`docker ps --filter name=mom-sandbox`" in text
    assert "fresh sandbox" not in text

    # A docker sandbox of the session's own is started afresh.
    assert "A fresh sandbox starts with the next tool call" in sandbox_host_gone(3)


def test_a_users_container_that_cannot_be_used_is_not_called_a_docker_sandbox() -> None:
    text = sandbox_unavailable("the worker did not answer", container="mom-sandbox")
    assert "docker sandbox" not in text
    assert text.startswith("Cannot run in the container mom-sandbox: the worker did not answer")
    assert "`docker ps --filter name=mom-sandbox`" in text

    # The lookup's own reason already says what to run; it is not followed by a second hint.
    stopped = sandbox_unavailable(
        "The container mom-sandbox is exited; start it with `docker start mom-sandbox`", "mom-sandbox"
    )
    assert "docker ps" not in stopped

    assert sandbox_unavailable("no engine") == "Could not start the docker sandbox: no engine"
