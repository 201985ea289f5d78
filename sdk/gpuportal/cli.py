"""gpuportal: the command line on top of the SDK.

gpuportal login URL [--token TOKEN] [--tenant T] [--ssh-host NODE]  (else GPUPORTAL_TOKEN, or asked)
gpuportal jobs submit -f job.yaml [--wait running]
gpuportal jobs launch TEMPLATE [--name N] [--gpus G] [--image I] [--replicas task=N ...]
gpuportal jobs list [--state S] [-o json]
gpuportal jobs status NAME [--endpoints] [-o json]
gpuportal jobs events NAME | cancel NAME | relaunch NAME | delete NAME [--delete-data]
gpuportal jobs logs NAME [--pod P] [--container C] [--tail N] [-f]
gpuportal endpoints extend NAME [--endpoint E] --hours 4
gpuportal ssh NAME [--print]

GPUPORTAL_TOKEN gives login its token; GPUPORTAL_TIMEOUT the seconds to wait for an answer (30).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from pathlib import Path

import requests
import yaml

from .client import Client, JobEnded, PortalError
from .models import VolcanoJob


class Usage(Exception):  # noqa: N818 (said to the user as it is)
    """Input the command cannot use, said in plain words."""


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "gpuportal" / "config.json"


def load_config() -> dict:
    path = config_path()
    again = "run `gpuportal login URL` (it asks for the token, or reads GPUPORTAL_TOKEN)"
    if not path.exists():
        sys.exit(f"Not logged in: {again} first.")
    try:
        config = json.loads(path.read_text())
        if not (isinstance(config, dict) and config.get("url") and config.get("token")):
            raise ValueError("no url or token")
    except (OSError, ValueError) as exc:
        sys.exit(f"error: the settings in {path} cannot be used ({exc}): {again}.")
    return config


def save_config(data: dict):
    """Written readable by its owner alone from the first byte: it holds the token."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(data, indent=2))


def client(config) -> Client:
    """GPUPORTAL_TIMEOUT: seconds to wait for each answer (30)."""
    try:
        timeout = float(os.environ.get("GPUPORTAL_TIMEOUT") or 30)
    except ValueError:
        raise Usage("GPUPORTAL_TIMEOUT is a number of seconds, such as 60.") from None
    return Client(config["url"], config["token"], timeout=timeout)


def tenant_of(args, config):
    tenant = getattr(args, "tenant", None) or config.get("tenant")
    if not tenant:
        sys.exit("Say which tenant: --tenant T (or `gpuportal login ... --tenant T`).")
    return tenant


def show(rows, columns, output):
    if output == "json":
        print(json.dumps(rows, indent=2, default=str))
        return
    widths = [max([len(c), *(len(str(r.get(c, ""))) for r in rows)]) for c in columns]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in rows:
        print("  ".join(str(row.get(c, "")).ljust(w) for c, w in zip(columns, widths, strict=True)))


def cmd_login(args):
    # On the command line a token shows in `ps` and the shell's history: the environment or
    # a prompt keep it out of both.
    token = args.token or os.environ.get("GPUPORTAL_TOKEN") or getpass.getpass("API token: ")
    probe = client({"url": args.url, "token": token})  # with GPUPORTAL_TIMEOUT as the rest
    probe.templates()  # fails loudly on a wrong URL or token
    save_config({"url": args.url, "token": token, "tenant": args.tenant, "ssh_host": args.ssh_host})
    print(f"Logged in to {args.url}; settings in {config_path()}")


def cmd_submit(args, config):
    try:
        data = yaml.safe_load(Path(args.file).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise Usage(f"cannot read {args.file}: {exc}") from exc
    if not isinstance(data, dict):
        raise Usage(f"{args.file} holds no job: write its fields (name, image, ...) as a mapping.")
    if args.tenant and data.get("queue") not in (None, args.tenant):
        raise Usage(f"{args.file} says queue {data['queue']}, --tenant says {args.tenant}.")
    if not data.get("queue"):
        data["queue"] = tenant_of(args, config)
    try:
        job = VolcanoJob.from_dict(data)
    except (TypeError, ValueError) as exc:
        raise Usage(f"{args.file}: {exc}") from exc
    api = client(config)
    created = api.submit(job)
    if args.wait:
        created = api.wait(job, args.wait, timeout=args.timeout)
    show([summary(created)], SUMMARY, args.output)


SUMMARY = ["name", "state", "gpus", "owner", "queue_position"]


def summary(job):
    state = "deleting" if job.get("delete_requested") else job.get("state")
    return {
        **{k: job.get(k) for k in SUMMARY},
        "state": state,
        "endpoints": {e["name"]: e["url"] for e in job.get("endpoints", [])},
    }


def cmd_launch(args, config):
    overrides = {}
    if args.gpus is not None:
        overrides["gpus"] = args.gpus
    if args.image:
        overrides["image"] = args.image
    if args.replicas:
        overrides["replicas"] = dict(_replicas(r) for r in args.replicas)
    created = client(config).launch(
        tenant_of(args, config), args.template, name=args.name, **overrides
    )
    show([summary(created)], SUMMARY, args.output)


def _replicas(text):
    task, _, count = text.partition("=")
    if not task or not count.isascii() or not count.isdigit():
        raise Usage(f"--replicas takes TASK=N, such as worker=4 (got {text!r}).")
    return task, int(count)


def cmd_list(args, config):
    filters = {"state": args.state} if args.state else {}
    show(
        [summary(j) for j in client(config).list(tenant_of(args, config), **filters)],
        SUMMARY,
        args.output,
    )


def cmd_status(args, config):
    job = client(config).get(args.name, tenant_of(args, config))
    if args.output == "json":
        print(json.dumps(job, indent=2, default=str))
        return
    state = "deleting" if job.get("delete_requested") else job["state"]
    print(f"{job['name']}: {state}" + (f" ({job['message']})" if job["message"] else ""))
    if job.get("queue_position"):
        print(f"  waiting in the tenant's queue at position {job['queue_position']}")
    if job.get("pending_reason"):
        print(f"  why pending: {job['pending_reason']}")
    if args.endpoints:
        for e in job["endpoints"]:
            if e.get("closed"):  # older portals do not say
                state = "closed: the job has ended"
            else:
                state = "expired" if e["expired"] else f"until {e['expires_at']}"
            print(f"  {e['name']:<12} {e['url']}  ({state})")


def cmd_events(args, config):
    show(
        client(config).events(args.name, tenant_of(args, config)),
        ["created_at", "kind", "message"],
        args.output,
    )


def cmd_cancel(args, config):
    job = client(config).cancel(args.name, tenant_of(args, config))
    print(f"{job['name']}: cancelling ({job['state']})")


def cmd_relaunch(args, config):
    job = client(config).relaunch(args.name, tenant_of(args, config))
    for warning in job.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    show([summary(job)], SUMMARY, args.output)


def cmd_logs(args, config):
    """One pod's log (the first pod of the job unless --pod says which), or with -f its log as
    it grows, until the container stops."""
    api, tenant = client(config), tenant_of(args, config)
    pod = args.pod
    if not pod:
        pods = api.pods(args.name, tenant)
        if not pods:
            raise Usage(f"{args.name} has no pods (yet, or any more): see `gpuportal jobs status`.")
        pod = pods[0]["name"]
        if len(pods) > 1:
            others = ", ".join(p["name"] for p in pods[1:4]) + (", ..." if len(pods) > 4 else "")
            print(f"[{pod}; the job's other pods: {others} (--pod)]", file=sys.stderr)
    if args.follow:
        for text in api.follow_log(
            args.name, pod, tenant, tail=args.tail or 100, container=args.container
        ):
            sys.stdout.write(text)
            sys.stdout.flush()
        return
    sys.stdout.write(api.log(args.name, pod, tenant, tail=args.tail, container=args.container))


def cmd_delete(args, config):
    client(config).delete(args.name, tenant_of(args, config), delete_data=args.delete_data)
    print(f"{args.name}: deleting")


def cmd_extend(args, config):
    api, tenant = client(config), tenant_of(args, config)
    names = [args.endpoint] if args.endpoint else list(api.endpoints(args.name, tenant))
    for name in names:
        endpoint = api.extend(args.name, name, args.hours, tenant)
        print(f"{name}: expires {endpoint['expires_at']}")


def ssh_command(job, ssh_host, user="root"):
    for e in job["endpoints"]:
        if e["protocol"] != "ssh":
            continue
        observed = e.get("observed") or {}
        if observed.get("node_port") and ssh_host:
            return ["ssh", "-p", str(observed["node_port"]), f"{user}@{ssh_host}"]
        if observed.get("ip"):
            return ["ssh", "-p", str(e["container_port"]), f"{user}@{observed['ip']}"]
    return None


def why_no_ssh(job, ssh_host):
    """Why `ssh_command` found no way in, and what to do."""
    ssh = [e for e in job["endpoints"] if e["protocol"] == "ssh"]
    if not ssh:
        return "the job exposes no SSH port (expose one with protocol ssh)."
    endpoint = ssh[0]
    if endpoint.get("mode") == "podip":
        return (
            f"its SSH endpoint is reachable only from inside the cluster ({endpoint['url']}). "
            "From outside, a platform admin allows direct exposure for the tenant and the job "
            "exposes the port with mode nodeport (then log in with --ssh-host NODE) or "
            "loadbalancer."
        )
    if endpoint.get("mode") == "nodeport" and not ssh_host:
        return "its SSH port is a NodePort: log in again with --ssh-host and a node's address."
    return "its SSH endpoint has no address yet; try again in a moment."


def cmd_ssh(args, config):
    job = client(config).get(args.name, tenant_of(args, config))
    command = ssh_command(job, config.get("ssh_host"), args.user)
    if command is None:
        sys.exit(f"{args.name}: {why_no_ssh(job, config.get('ssh_host'))}")
    if args.print:
        print(" ".join(command))
        return
    os.execvp(command[0], command)  # noqa: S606  (argv list, no shell)


def parser():
    root = argparse.ArgumentParser(
        prog="gpuportal", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = root.add_subparsers(dest="command", required=True)
    login = sub.add_parser("login", help="store the portal URL and an API token")
    login.add_argument("url")
    login.add_argument(
        "--token",
        default="",
        help="a personal API token (profile page); else GPUPORTAL_TOKEN, else asked",
    )
    login.add_argument("--tenant", default="")
    login.add_argument("--ssh-host", default="", help="a node address for NodePort SSH")
    login.set_defaults(func=cmd_login, needs_config=False)

    def command(group, name, func, help_text):
        p = group.add_parser(name, help=help_text)
        p.add_argument("--tenant")
        p.add_argument("-o", "--output", choices=["table", "json"], default="table")
        p.set_defaults(func=func, needs_config=True)
        return p

    jobs = sub.add_parser("jobs", help="submit, watch and manage jobs").add_subparsers(
        dest="action", required=True
    )
    p = command(jobs, "submit", cmd_submit, "submit a job described in YAML")
    p.add_argument("-f", "--file", required=True)
    p.add_argument("--wait", help="wait for this state, e.g. running")
    p.add_argument("--timeout", type=float, default=600)
    p = command(jobs, "launch", cmd_launch, "launch from a template")
    p.add_argument("template")
    p.add_argument("--name", default="")
    p.add_argument("--gpus", type=int, help="GPUs of each replica of every GPU task")
    p.add_argument("--image")
    p.add_argument("--replicas", nargs="*", help="task=N ...")
    p = command(jobs, "list", cmd_list, "list the tenant's jobs")
    p.add_argument("--state")
    p = command(jobs, "status", cmd_status, "a job's state, pending reason and endpoints")
    p.add_argument("name")
    p.add_argument("--endpoints", action="store_true")
    command(jobs, "events", cmd_events, "a job's status events").add_argument("name")
    command(jobs, "cancel", cmd_cancel, "cancel a job").add_argument("name")
    command(jobs, "relaunch", cmd_relaunch, "launch an ended job again").add_argument("name")
    p = command(jobs, "logs", cmd_logs, "a pod's log (-f: follow it)")
    p.add_argument("name")
    p.add_argument("--pod", help="which pod (default: the job's first)")
    p.add_argument("--container", default="")
    p.add_argument("--tail", type=int, help="only the last N lines")
    p.add_argument("-f", "--follow", action="store_true", help="until the container stops")
    p = command(jobs, "delete", cmd_delete, "delete a job and its workspace")
    p.add_argument("name")
    p.add_argument("--delete-data", action="store_true")
    endpoints = sub.add_parser("endpoints", help="job endpoints").add_subparsers(
        dest="action", required=True
    )
    p = command(endpoints, "extend", cmd_extend, "extend a job's endpoints")
    p.add_argument("name")
    p.add_argument("--endpoint")
    p.add_argument("--hours", type=int, required=True, help="keep open at least this long from now")
    p = command(sub, "ssh", cmd_ssh, "ssh into a job's SSH endpoint")
    p.add_argument("name")
    p.add_argument("--user", default="root")
    p.add_argument("--print", action="store_true", help="print the command instead")
    return root


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        if args.needs_config:
            args.func(args, load_config())
        else:
            args.func(args)
    except (PortalError, Usage, TimeoutError, JobEnded) as exc:
        sys.exit(f"error: {exc}")
    except KeyboardInterrupt:  # how one stops following a log, or waiting: no traceback
        sys.exit(130)
    except requests.ReadTimeout as exc:  # sent: the portal may have done it
        sys.exit(
            f"error: the portal did not answer in time ({exc.__class__.__name__}); what was asked "
            "may still have been done: look (`gpuportal jobs list`) before trying again."
        )
    except requests.RequestException as exc:
        sys.exit(f"error: cannot reach the portal ({exc.__class__.__name__}): {exc}")


if __name__ == "__main__":
    main()
