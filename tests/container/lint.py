"""Checks the container files (Dockerfile, deploy/compose.yaml, deploy/Caddyfile, and the
cluster's deploy/cluster/compose.yaml, Caddyfile and nats.conf) without
Docker, which this machine does not have, so the images are never built here: every
instruction is one Docker knows, base images are pinned and the Rust one new enough for
the workspace, copied files exist, the image runs as a non-root user and its health
check names a route the server has, and every KENNY_* variable set is one
`kenny-server serve` reads. In compose: the build context and mounted files exist, named
volumes are declared, and kenny itself is published on loopback only (the proxy is the
public side). In the cluster's: every replica shares the database and NATS, keeps its own
data volume and shares the release builds, the proxy balances over every replica with a
health check, and NATS requires a password. Run: python3 tests/container/lint.py [path/to/kenny-server]."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
INSTRUCTIONS = {"FROM", "RUN", "COPY", "WORKDIR", "USER", "ENV", "VOLUME", "EXPOSE", "HEALTHCHECK",
                "ENTRYPOINT", "CMD", "ARG", "LABEL"}
problems: list[str] = []


def problem(text: str) -> None:
    problems.append(text)


def serve_variables(server_bin: Path) -> set[str]:
    out = subprocess.run([str(server_bin), "serve", "--help"], capture_output=True, text=True, timeout=30, check=True).stdout
    return set(re.findall(r"env: (KENNY_[A-Z0-9_]+)", out))


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word, rest.strip()))
    return out


def lint_dockerfile(known_vars: set[str]) -> None:
    steps = instructions((REPO / "Dockerfile").read_text())
    rust_version = tomllib.loads((REPO / "Cargo.toml").read_text())["workspace"]["package"]["rust-version"]
    routes = (REPO / "crates/kenny-server/src/server.rs").read_text()
    stages, user, built = [], None, set()
    for word, rest in steps:
        if word not in INSTRUCTIONS:
            problem(f"Dockerfile: unknown instruction {word}")
        if word == "FROM":
            image = rest.split()[0]
            stages.append(rest.split()[-1] if " AS " in rest.upper() else image)
            user = None
            if ":" not in image or image.endswith(":latest"):
                problem(f"Dockerfile: base image {image} is not pinned to a tag")
            if image.startswith("rust:"):
                have = tuple(int(x) for x in re.findall(r"\d+", image.split(":")[1])[:2])
                want = tuple(int(x) for x in rust_version.split(".")[:2])
                if have < want:
                    problem(f"Dockerfile: {image} is older than the workspace's rust-version {rust_version}")
        elif word == "RUN" and "cargo build" in rest:
            built |= set(re.findall(r"-p (\S+)", rest))
            if "--locked" not in rest:
                problem("Dockerfile: cargo build without --locked")
        elif word == "COPY":
            args = [a for a in rest.split() if not a.startswith("--")]
            if "--from=" in rest:
                for src in args[:-1]:
                    if Path(src).name not in built:
                        problem(f"Dockerfile: copies {src}, which the build stage does not build")
            else:
                for src in args[:-1]:
                    if not (REPO / src).exists():
                        problem(f"Dockerfile: COPY {src}: no such file in the repository")
        elif word == "USER":
            user = rest
        elif word == "ENV":
            for name in re.findall(r"(KENNY_[A-Z0-9_]+)=", rest):
                if name not in known_vars:
                    problem(f"Dockerfile: ENV {name} is not a kenny-server serve setting")
        elif word == "HEALTHCHECK":
            for path in re.findall(r"127\.0\.0\.1:\d+(/\S*)", rest):
                if f'"{path}"' not in routes:
                    problem(f"Dockerfile: HEALTHCHECK asks {path}, which the server does not serve")
        elif word in ("ENTRYPOINT", "CMD"):
            try:
                json.loads(rest)
            except ValueError:
                problem(f"Dockerfile: {word} is not a JSON array (exec form)")
    if len(stages) < 2:
        problem("Dockerfile: expected a build stage and a runtime stage")
    if user in (None, "root", "0"):
        problem("Dockerfile: the final image runs as root")


def lint_compose(known_vars: set[str]) -> None:
    here = REPO / "deploy"
    doc = yaml.safe_load((here / "compose.yaml").read_text())
    declared = set((doc.get("volumes") or {}).keys())
    for name, service in doc["services"].items():
        build = service.get("build")
        if build:
            context = (here / build["context"]).resolve()
            if not (context / build.get("dockerfile", "Dockerfile")).is_file():
                problem(f"compose: service {name} builds from a Dockerfile that does not exist")
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                if not (here / source).exists():
                    problem(f"compose: service {name} mounts {source}, which does not exist")
            elif source not in declared:
                problem(f"compose: service {name} uses volume {source}, which is not declared")
        for var in (service.get("environment") or {}):
            if var.startswith("KENNY_") and name == "kenny" and var not in known_vars:
                problem(f"compose: {var} is not a kenny-server serve setting")
        if name == "kenny":
            for port in service.get("ports", []):
                if not str(port).startswith("127.0.0.1:"):
                    problem(f"compose: kenny publishes {port} beyond loopback; the proxy is the public side")
    caddy = (here / "Caddyfile").read_text()
    if "reverse_proxy kenny:7420" not in caddy:
        problem("Caddyfile: does not pass requests to the kenny service")


def lint_cluster(known_vars: set[str]) -> None:
    here = REPO / "deploy" / "cluster"
    doc = yaml.safe_load((here / "compose.yaml").read_text())
    declared = set((doc.get("volumes") or {}).keys())
    replicas = sorted(n for n in doc["services"] if n.startswith("kenny-"))
    if len(replicas) < 2:
        problem(f"cluster compose: {len(replicas)} kenny replicas; a cluster has at least two")
    data_volumes = set()
    for name, service in doc["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                if not (here / source).exists():
                    problem(f"cluster compose: service {name} mounts {source}, which does not exist")
            elif source not in declared:
                problem(f"cluster compose: service {name} uses volume {source}, which is not declared")
        if name not in replicas:
            continue
        build = service.get("build") or {}
        if not ((here / build.get("context", "")).resolve() / build.get("dockerfile", "Dockerfile")).is_file():
            problem(f"cluster compose: {name} builds from a Dockerfile that does not exist")
        env = service.get("environment") or {}
        for var in env:
            if var.startswith("KENNY_") and var not in known_vars:
                problem(f"cluster compose: {var} is not a kenny-server serve setting")
        for var in ("KENNY_DATABASE_URL", "KENNY_NATS_URL", "KENNY_PUBLIC_URL"):
            if var not in env:
                problem(f"cluster compose: {name} does not set {var}")
        if service.get("ports"):
            problem(f"cluster compose: {name} publishes ports; only the proxy is reachable")
        mounts = {v.split(":")[1]: v.split(":")[0] for v in service.get("volumes", [])}
        if mounts.get("/var/lib/kenny/agent-releases") != "agent-releases":
            problem(f"cluster compose: {name} does not share the agent-releases volume")
        data_volumes.add(mounts.get("/var/lib/kenny"))
    if len(data_volumes) != len(replicas) or None in data_volumes:
        problem("cluster compose: each replica needs a data volume of its own (the data directory is locked)")
    caddy = (here / "Caddyfile").read_text()
    for name in replicas:
        if f"{name}:7420" not in caddy:
            problem(f"cluster Caddyfile: does not balance over {name}")
    if "health_uri /readyz" not in caddy:
        problem("cluster Caddyfile: no health check on /readyz")
    nats = (here / "nats.conf").read_text()
    if "jetstream" not in nats or "password" not in nats:
        problem("cluster nats.conf: JetStream and a password are both required")


def main() -> int:
    server_bin = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "target/debug/kenny-server"
    known = serve_variables(server_bin)
    lint_dockerfile(known)
    lint_compose(known)
    lint_cluster(known)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print("container files: ok (Dockerfile, deploy/compose.yaml and Caddyfile, deploy/cluster/); images are not built here: no Docker")
    return 0


if __name__ == "__main__":
    sys.exit(main())
