"""docs/prometheus/service-rules.yml: promtool (Debian's prometheus package) checks the rules and evaluates them
over series shaped like the service's /metrics."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.rig.procs import REPO

RULES = REPO / "docs" / "prometheus" / "service-rules.yml"

TESTS = """
rule_files: [{rules}]
evaluation_interval: 30s
tests:
  - interval: 30s
    input_series:
      # polls succeed every 30 s for 5 minutes, then stop (the poller is stuck)
      - series: 'kafka_fleet_job_last_success_timestamp_seconds{{job="poll"}}'
        values: '0+30x10 300x20'
      - series: 'kafka_fleet_component_restarts_total{{component="poll"}}'
        values: '0 1 2 3 4 5 6 7 8 9 10'
      - series: 'kafka_fleet_component_restarts_total{{component="ui"}}'
        values: '0x10'
    alert_rule_test:
      - eval_time: 4m
        alertname: FleetviewPollsStale
        exp_alerts: []
      - eval_time: 10m
        alertname: FleetviewPollsStale
        exp_alerts:
          - exp_labels: {{severity: critical, job: poll}}
            exp_annotations:
              summary: "fleetview has not completed a poll for 5m 0s"
              description: "The poller worker is down, restarting, or its writes to the lake fail; see /readyz and the service log."
      - eval_time: 5m
        alertname: FleetviewComponentRestarting
        exp_alerts:
          - exp_labels: {{severity: warning, component: poll}}
            exp_annotations:
              summary: "fleetview restarted poll 10 times in 30 minutes"
              description: "The component's process keeps exiting; its log is under <lake>/_state/service/logs/."
"""


def test_service_rules_check_and_fire_as_described(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: Debian's prometheus package provides it (make deps-system)"
    check = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and "SUCCESS: 4 rules found" in check.stdout, check.stdout + check.stderr
    tests = tmp_path / "tests.yml"
    tests.write_text(TESTS.format(rules=RULES))
    run = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
