"""Schemathesis against a real broker's ``/openapi.json`` (issue 9, item 3): no input answers 500, and
every answer matches the document (status code, content type, body schema).

The run is Schemathesis' own engine (what ``st run`` drives), bounded so that it fits CI: every phase
once (coverage, fuzzing, stateful over the links it infers), at most :data:`MAX_EXAMPLES` examples per
operation, a fixed seed, one worker, and a hard time budget of :data:`BUDGET_S` seconds (a watchdog
stops the engine; the test then fails). Schemathesis' own ``max-time`` is not used: with it the engine
repeats fuzzing and stateful until the time is spent. The document leaves out the replica routes
(``include_in_schema=False``), so the run never reaches them.

A failure prints each distinct finding with a ``curl`` line that reproduces it.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest

schemathesis = pytest.importorskip("schemathesis")

from schemathesis import engine  # noqa: E402
from schemathesis.config import SchemathesisConfig  # noqa: E402
from schemathesis.engine import StopReason, events  # noqa: E402

pytestmark = pytest.mark.cluster

#: Fixed, so a failure found in CI is found again on a developer's machine.
SEED = 20240509
#: Examples per operation and phase (Hypothesis' ``max_examples``).
MAX_EXAMPLES = 50
#: Hard budget of the whole run; past it the engine is stopped and the test fails. One pass on a 2-core
#: machine: ~9,000 requests in 164 s alone (2026-11-29, long polls capped at 1 s), 260 s while CI's other
#: worker runs the multi-broker tests; the budget leaves room for that load, it stops a hang.
BUDGET_S = 480
#: Longest long poll a generated request asks for (ms): enough to exercise a wait, short enough that the
#: waits of an empty partition do not make up the run.
LONG_POLL_MAX_MS = 250
#: Steps of one stateful scenario (a chain of linked calls).
MAX_STATEFUL_STEPS = 6

#: What is enforced on every answer.
CHECKS = ["not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_schema_conformance"]


def _config(base_url: str) -> SchemathesisConfig:
    config = SchemathesisConfig.from_dict({
        "base-url": base_url,
        "seed": SEED,
        # One worker: the broker gets the machine's other core; with several workers Python 3.11's ast
        # (used by Hypothesis to describe filters) fails when threads parse at once.
        "workers": 1,
        "request-timeout": 30,
        "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
        "phases": {"stateful": {"enabled": True, "max-steps": MAX_STATEFUL_STEPS}},
    })
    config.projects.default.checks.update(included_check_names=CHECKS)
    return config


def _short_long_polls(document: dict) -> dict:
    """The document with every ``max_wait_ms`` / ``timeout`` query parameter capped at
    :data:`LONG_POLL_MAX_MS`: a fetch of an empty partition answers after its whole long poll (up to 60 s,
    a correct answer that only takes time), which must neither time a request out nor eat the budget."""
    for path in document["paths"].values():
        for operation in path.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                if parameter.get("in") == "query" and parameter.get("name") in ("max_wait_ms", "timeout"):
                    schema = parameter.setdefault("schema", {})
                    for variant in [schema, *schema.get("anyOf", [])]:
                        if variant.get("type") == "integer":
                            variant["maximum"] = min(variant.get("maximum", LONG_POLL_MAX_MS), LONG_POLL_MAX_MS)
    return document


def _describe(failure, steps) -> str:
    curl = steps[-1].curl if steps else ""
    return f"{failure.operation}: {failure.title}\n    {failure.message.strip()}\n    {curl}".rstrip()


def test_openapi_document_holds_for_generated_requests(gw):
    schema = schemathesis.openapi.from_dict(_short_long_polls(httpx.get(f"{gw.url}/openapi.json").json()),
                                            config=_config(gw.url))
    started = time.monotonic()
    findings: dict[tuple, str] = {}
    errors: list[str] = []
    requests = 0
    finished = None
    phase_started: dict = {}
    phases: list[str] = []
    stream = engine.from_schema(schema).execute()
    watchdog = threading.Timer(BUDGET_S, stream.stop)
    watchdog.start()
    try:
        run = list(stream)
    finally:
        watchdog.cancel()
    for event in run:
        if isinstance(event, (events.ScenarioFinished, events.FuzzScenarioFinished)):
            requests += len(event.recorder.interactions)
            for checks in event.recorder.checks.values():
                for check in checks:
                    if check.failure_info is None:
                        continue
                    failure = check.failure_info.failure
                    key = (check.name, failure.operation, failure.title)
                    findings.setdefault(key, _describe(failure, check.failure_info.steps))
        elif isinstance(event, events.NonFatalError):
            errors.append(f"{event.label}: {event.info.title}: {event.info.message}")
        elif isinstance(event, events.FatalError):
            raise event.exception
        elif isinstance(event, events.PhaseStarted):
            phase_started[event.phase.name] = event.timestamp
        elif isinstance(event, events.PhaseFinished) and event.phase.name in phase_started:
            phases.append(f"{event.phase.name.value} {event.timestamp - phase_started[event.phase.name]:.0f} s "
                          f"({event.status.value})")
        elif isinstance(event, events.EngineFinished):
            finished = event
    elapsed = time.monotonic() - started
    print(f"schemathesis {schemathesis.__version__}: {requests} requests in {elapsed:.1f} s, seed {SEED}, "
          f"{len(findings)} distinct findings, {len(errors)} errors; phases: {', '.join(phases)}")
    assert not findings, f"{len(findings)} distinct findings:\n" + "\n".join(findings.values())
    assert not errors, "Schemathesis could not test some operations:\n" + "\n".join(errors)
    assert finished is not None and finished.stop_reason == StopReason.COMPLETED, (
        f"the run stopped early: {finished.stop_reason if finished else 'no EngineFinished event'}")
    assert requests > 1000  # the run really exercised the API
