"""The web planner's JSON API: each endpoint answers what the command's --json prints for the
same input; bad input is 422 with the field, the value and what is allowed; bodies are bounded;
nothing a request sends is taken as a path on the server."""

from __future__ import annotations

import builtins
import io
import json
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from fabricplan.web import create_app
from fabricplan.web.limits import MAX_JSON_BYTES, MAX_UPLOAD_BYTES
from web_helpers import DEMO, LOGS, ROOT, UNDERPERFORMING, cli_json, cli_text, scenario_body


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def test_the_schema_lists_every_operation(client):
    schema = client.get("/openapi.json").json()
    assert {
        "/api/scenario/check",
        "/api/step",
        "/api/advise",
        "/api/grade",
        "/api/collective",
        "/api/topology",
        "/api/report",
    } <= set(schema["paths"])


def test_check_is_scenario_check_json(client):
    r = client.post("/api/scenario/check", json=scenario_body("cluster.gpus=1024"))
    assert r.status_code == 200
    assert r.json() == cli_json("scenario", "check", str(DEMO), "--set", "cluster.gpus=1024")[1]


def test_step_is_step_json(client):
    body = scenario_body("cluster.gpus=256", congestion="none")
    r = client.post("/api/step", json=body)
    assert r.status_code == 200
    code, cli = cli_json("step", str(DEMO), "--set", "cluster.gpus=256", "--congestion", "none")
    assert code == 0 and r.json() == cli


def test_advise_is_advise_json(client):
    r = client.post("/api/advise", json=scenario_body("cluster.gpus=1024", break_even=False))
    assert r.status_code == 200
    code, cli = cli_json("advise", str(DEMO), "--set", "cluster.gpus=1024", "--no-break-even")
    assert code == 0 and r.json() == cli
    assert r.json()["recommendation"]["fabric"] in {"ib-ndr", "roce-400g"}


def test_grade_of_an_upload_and_of_text_is_grade_json(client):
    code, cli = cli_json("grade", str(UNDERPERFORMING), "--nodes", "2")
    assert code == 3 and cli["verdict"] == "fail"  # the command worked; the fabric did not
    with UNDERPERFORMING.open("rb") as log:
        up = client.post("/api/grade", data={"nodes": "2"}, files={"log": ("x.txt", log)})
    text = client.post("/api/grade", data={"nodes": "2", "log_text": UNDERPERFORMING.read_text()})
    assert up.status_code == text.status_code == 200
    assert up.json() == text.json() == cli


def test_grade_reads_the_cluster_from_a_scenario(client):
    log = LOGS / "12_aws-samples_EFA_p4de-p5_2nodes.txt"
    data = {"scenario": DEMO.read_text(), "set": ["cluster.gpus=1024"], "run": ["1", "2"]}
    r = client.post("/api/grade", data=data, files={"log": ("log.txt", log.read_bytes())})
    assert r.status_code == 200
    args = ("--scenario", str(DEMO), "--set", "cluster.gpus=1024", "--run", "1", "--run", "2")
    assert r.json() == cli_json("grade", str(log), *args)[1]


def test_collective_is_collective_json(client):
    body = {"nodes": 2, "fabric": "ib-ndr", "sizes": "8,1M,1G", "op": "all_gather"}
    r = client.post("/api/collective", json=body)
    assert r.status_code == 200
    args = ("--nodes", "2", "--fabric", "ib-ndr", "--sizes", "8,1M,1G", "--op", "all_gather")
    assert r.json() == cli_json("collective", *args)[1]
    r = client.post("/api/collective", json=scenario_body(max="1M"))
    assert r.json() == cli_json("collective", "--scenario", str(DEMO), "--max", "1M")[1]


def test_topology_is_topology_json(client):
    r = client.post("/api/topology", json=scenario_body())
    assert r.status_code == 200 and len(r.json()["designs"]) == 2
    assert r.json() == cli_json("topology", "--scenario", str(DEMO))[1]
    r = client.post("/api/topology", json={"gpus": 1024, "oversubscription": "2"})
    assert r.json() == cli_json("topology", "--gpus", "1024", "--oversubscription", "2")[1]


def test_a_scenario_problem_is_422_with_the_cli_problems(client):
    r = client.post("/api/advise", json=scenario_body("cluster.gpus=0"))
    assert r.status_code == 422
    code, cli = cli_json("advise", str(DEMO), "--set", "cluster.gpus=0")
    assert code == 2
    doc = r.json()
    assert doc["error"] == "scenario: 1 problem in scenario"
    assert [{k: p[k] for k in ("field", "message", "value")} for p in doc["problems"]] == (
        cli["problems"]
    )
    assert doc["problems"][0]["field"] == "cluster.gpus" and doc["problems"][0]["value"] == 0
    assert doc["problems"][0]["text"] == "cluster.gpus: must be greater than 0 (got 0)"


def test_bad_overrides_and_yaml_are_422(client):
    r = client.post("/api/scenario/check", json=scenario_body("no-equals-sign"))
    assert r.status_code == 422
    (p,) = r.json()["problems"]
    assert p["field"] == "--set" and p["value"] == "no-equals-sign"
    r = client.post("/api/scenario/check", json={"scenario": "cluster: [unclosed", "set": []})
    assert r.status_code == 422 and "line" in r.json()["problems"][0]["message"]


def test_a_request_field_out_of_range_is_422_in_the_cli_words(client):
    r = client.post("/api/collective", json={"nodes": 0})
    assert r.status_code == 422
    (p,) = r.json()["problems"]
    assert p == {
        "field": "nodes",
        "message": "0 is outside the allowed range, 1 to 1,000,000",
        "value": 0,
        "text": "nodes: 0 is outside the allowed range, 1 to 1,000,000 (got 0)",
    }
    r = client.post("/api/advise", json=scenario_body(unknown_key=1, seed="x"))
    fields = {p["field"]: p["message"] for p in r.json()["problems"]}
    assert fields == {"seed": "must be a whole number", "unknown_key": "unknown key"}
    r = client.post("/api/step", json={"set": []})
    assert r.status_code == 422 and r.json()["problems"][0]["field"] == "scenario"


def test_model_refusals_are_422(client):
    r = client.post("/api/collective", json={"nodes": 2, "algo": "NOPE"})
    assert r.status_code == 422 and "NOPE" in r.json()["error"]
    r = client.post("/api/topology", json={})
    assert r.status_code == 422 and r.json()["error"] == "give --gpus (or --scenario)"
    r = client.post("/api/grade", data={"log_text": "no rows here"})
    assert r.status_code == 422 and r.json()["error"].startswith("log: no nccl-tests result rows")
    r = client.post("/api/grade", data={})
    assert r.status_code == 422 and r.json()["problems"][0]["field"] == "log"


def test_bodies_over_their_limit_are_413(client):
    big = {"scenario": "x" * (MAX_JSON_BYTES + 10), "set": []}
    assert client.post("/api/scenario/check", json=big).status_code == 413
    log = io.BytesIO(b"#" * (MAX_UPLOAD_BYTES + 10))
    r = client.post("/api/grade", files={"log": ("big.txt", log)})
    assert r.status_code == 413 and "8 MiB" in r.json()["error"]

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(MAX_JSON_BYTES // 65536 + 2):
            yield b" " * 65536

    r = client.post("/api/advise", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_nothing_sent_is_opened_as_a_path(client, monkeypatch, tmp_path):
    secret = tmp_path / "secret.yaml"
    secret.write_text(DEMO.read_text())
    opened: list[str] = []
    real_open = builtins.open

    def spy(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy)
    monkeypatch.setattr(io, "open", spy)
    for path in (str(secret), f"file://{secret}", "/etc/passwd", "../../etc/passwd"):
        r = client.post("/api/advise", json={"scenario": path, "set": []})
        assert r.status_code == 422  # text that is not a scenario, not a file to read
        r = client.post("/api/grade", data={"log_text": path, "nodes": "2"})
        assert r.status_code == 422
        r = client.post("/api/grade", files={"log": (path, b"nothing")})
        assert r.status_code == 422 and path not in r.text
    assert not [f for f in opened if "secret" in f or "passwd" in f]


def test_identical_requests_are_answered_from_the_cache():
    app = create_app()
    client = TestClient(app)
    cache = app.state.planner.cache
    body = scenario_body("cluster.gpus=256", break_even=False)
    first = client.post("/api/advise", json=body)
    second = client.post("/api/advise", json=body)
    assert first.content == second.content and (cache.misses, cache.hits) == (1, 1)
    client.post("/api/advise", json={**body, "seed": 1})
    assert cache.misses == 2


def test_the_page_and_its_files_are_served_with_a_strict_policy(client):
    page = client.get("/")
    assert (
        page.status_code == 200 and "default-src 'self'" in page.headers["content-security-policy"]
    )
    for name in ("app.js", "style.css", "demo.yaml"):
        assert client.get(f"/static/{name}").status_code == 200
    assert client.get("/static/../app.py").status_code == 404
    assert client.get("/static/index.html").status_code == 404
    assert client.get("/docs").status_code == 404  # its page would load scripts from elsewhere
    assert (ROOT / "src/fabricplan/web/static/demo.yaml").read_text() == DEMO.read_text()


def test_serve_binds_loopback_by_default_and_warns_otherwise(monkeypatch):
    import uvicorn

    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(kw))
    code, out = cli_text("serve", "--port", "8123")
    assert code == 0 and calls[-1]["host"] == "127.0.0.1" and calls[-1]["port"] == 8123
    assert "warning" not in out and "http://127.0.0.1:8123/" in out
    code, out = cli_text("serve", "--host", "0.0.0.0")
    assert code == 0 and calls[-1]["host"] == "0.0.0.0"
    assert "warning: listening on 0.0.0.0" in out


def test_other_commands_do_not_import_the_web_stack():
    code = (
        "import sys; from typer.testing import CliRunner; from fabricplan.cli.app import app; "
        f"r = CliRunner().invoke(app, ['scenario', 'check', {str(DEMO)!r}]); "
        "assert r.exit_code == 0, r.output; "
        "print(sorted(m for m in ('fastapi', 'uvicorn', 'starlette') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.replace("'", '"')) == []


def test_report_is_the_report_commands_file(client, tmp_path):
    r = client.post("/api/report", json=scenario_body("cluster.gpus=1024"))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.headers["content-disposition"] == 'attachment; filename="fabricplan-report.html"'
    out = tmp_path / "report.html"
    code, _ = cli_text("report", str(DEMO), "--set", "cluster.gpus=1024", "-o", str(out))
    assert code == 0 and r.content == out.read_bytes()
    bad = client.post("/api/report", json=scenario_body("cluster.gpus=0"))
    assert bad.status_code == 422 and bad.json()["problems"][0]["field"] == "cluster.gpus"
