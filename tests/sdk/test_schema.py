"""Every API operation from the OpenAPI schema, exercised property-based by Schemathesis against
the real server, with valid and invalid data, and in chains that follow the schema's links
(create a tenant, launch in it, cancel; create a volume, resize it, delete it): no server errors,
and responses match the schema."""

import re
import subprocess
import sys

import pytest

from accounts.models import ApiToken

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("who", ["bob", "admin"])
def test_schemathesis_finds_no_server_errors_and_no_schema_violations(
    served, team, worker, who, tmp_path
):
    direct = served
    token = ApiToken.issue(team[who], "schemathesis")[1]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "run",
            f"{direct}/api/v1/schema/",
            "--url",
            f"{direct}",
            "-H",
            f"Authorization: Bearer {token}",
            "-c",
            "not_a_server_error,response_schema_conformance,content_type_conformance",
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--mode",
            "all",
            "--max-examples",
            "6",
            "--request-timeout",
            "20",
            "--continue-on-failure",
            "--suppress-health-check",
            "all",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    print(result.stdout[-3000:])
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    # The stateful phase ran (it is skipped when the schema has no links to follow).
    assert re.search(r"✅ Stateful", result.stdout), result.stdout[-3000:]
