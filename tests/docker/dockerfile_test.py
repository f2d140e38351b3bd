#!/usr/bin/python3
"""Static checks of the Docker images' definitions, without a Docker engine.

  dockerfile_test.py --root SOURCE_DIR [--relserve BUILD/bin/relserve]

For Dockerfile and Dockerfile.cuda, in the runtime stage:
  - the HEALTHCHECK runs relserve-healthcheck (scripts/docker-healthcheck.sh, copied into
    /opt/relserve/bin and let into the build context by .dockerignore), which follows the
    configured ports and TLS, rather than a probe of a fixed gRPC address;
  - the defaults (the model, the drain, the GPU) are RELSERVE_ environment variables, and CMD
    holds no flag: a CMD's flags all vanish as soon as a user passes flags of their own, the
    drain's --shutdown-grace-seconds with them. The drain fits Docker's 10 s stop timeout;
  - every RELSERVE_ variable names a flag of relserve (with --relserve: from its --help);
  - relserve-client is built and installed into /opt/relserve/bin, which the runtime stage
    copies (the README calls it with `docker exec`);
  - the ports EXPOSEd are the defaults the health check and relserve use.
And the README's Docker quick start installs and starts the engine, makes a real model, publishes
ports that follow the flags, waits for the server before its first call (showing the container's
log if it stops), calls it with the client inside the image (a Docker-only user has no build/
tree), and removes the container with its volumes (tests/docker/readme_quickstart_test.sh runs it).
"""

import argparse
import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys

DOCKER_STOP_TIMEOUT_S = 10  # docker stop's default
HEALTHCHECK_BIN = "/opt/relserve/bin/relserve-healthcheck"
HEALTHCHECK_SRC = "scripts/docker-healthcheck.sh"


class Checks:
    def __init__(self):
        self.passed, self.failures = 0, []

    def check(self, ok, message):
        if ok:
            self.passed += 1
        else:
            self.failures.append(message)
            print("FAIL: " + message)
        return ok


def instructions(path):
    """[(INSTRUCTION, arguments)] of a Dockerfile: comments dropped, continuations joined."""
    out, current = [], ""
    with open(path) as f:
        for line in f:
            stripped = line.strip()
            if not current and (not stripped or stripped.startswith("#")):
                continue
            if current and stripped.startswith("#"):
                continue  # a comment inside a continued instruction
            if stripped.endswith("\\"):
                current += stripped[:-1] + " "
                continue
            current += stripped
            if current:
                word, _, rest = current.partition(" ")
                out.append((word.upper(), rest.strip()))
            current = ""
    return out


def stages(instrs):
    """[(name, [instructions])] split at each FROM."""
    out = []
    for ins, args in instrs:
        if ins == "FROM":
            words = args.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else words[0]
            out.append((name, []))
        elif out:
            out[-1][1].append((ins, args))
    return out


def exec_form(args):
    """The JSON exec form of CMD/ENTRYPOINT/HEALTHCHECK CMD as a list, or None for shell form."""
    try:
        value = json.loads(args)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def env_pairs(args):
    """ENV a=b c=d (or the legacy ENV a b) as a dict."""
    words = shlex.split(args)
    if words and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    return dict(w.split("=", 1) for w in words)


def dockerignore_allows(root, path):
    """Whether .dockerignore lets PATH into the build context (the last matching rule wins)."""
    allowed = True
    with open(os.path.join(root, ".dockerignore")) as f:
        for line in f:
            rule = line.strip()
            if not rule or rule.startswith("#"):
                continue
            negate = rule.startswith("!")
            pattern = rule[1:] if negate else rule
            parts = path.split("/")
            prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
            if any(fnmatch.fnmatch(p, pattern) for p in prefixes):
                allowed = negate
    return allowed


def relserve_help(relserve):
    """{flag: default} from relserve --help."""
    r = subprocess.run([relserve, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    flags = {}
    for m in re.finditer(r"^  --([a-z0-9-]+) .*\n(?:      .*\n)*?      .*\(default: (.*)\)$", r.stdout, re.M):
        flags[m.group(1)] = m.group(2)
    return flags


def env_var(flag):
    return "RELSERVE_" + flag.upper().replace("-", "_")


def check_dockerfile(c, root, name, flags, cuda):
    path = os.path.join(root, name)
    staged = stages(instructions(path))
    c.check(len(staged) >= 2, "%s: expected a build and a runtime stage" % name)
    runtime = staged[-1][1]
    kinds = [i for i, _ in runtime]

    # HEALTHCHECK: the script, wherever the flags put the ports.
    hc = [a for i, a in runtime if i == "HEALTHCHECK"]
    if c.check(len(hc) == 1, "%s: one HEALTHCHECK expected in the runtime stage, found %d" % (name, len(hc))):
        opts, _, cmd = hc[0].partition("CMD ")
        command = exec_form(cmd.strip())
        c.check(command is not None and command[0] in ("relserve-healthcheck", HEALTHCHECK_BIN),
                "%s: HEALTHCHECK runs %s, not relserve-healthcheck (a fixed gRPC address misses other "
                "ports and TLS)" % (name, cmd.strip()))
        m = re.search(r"--timeout=(\d+)s", opts)
        c.check(m is not None and int(m.group(1)) >= 3, "%s: HEALTHCHECK --timeout under 3 s: %s" % (name, opts))
    copies = [a for i, a in runtime if i == "COPY"]
    c.check(any(a.split()[-2:] == [HEALTHCHECK_SRC, HEALTHCHECK_BIN] for a in copies),
            "%s: the runtime stage does not COPY %s to %s" % (name, HEALTHCHECK_SRC, HEALTHCHECK_BIN))

    # Defaults in the environment, none in CMD.
    env = {}
    for i, a in runtime:
        if i == "ENV":
            env.update(env_pairs(a))
    grace = env.get("RELSERVE_SHUTDOWN_GRACE_SECONDS")
    if c.check(grace is not None, "%s: no ENV RELSERVE_SHUTDOWN_GRACE_SECONDS: the drain's default must survive "
                                  "a user's own flags" % name):
        c.check(0 < float(grace) < DOCKER_STOP_TIMEOUT_S,
                "%s: RELSERVE_SHUTDOWN_GRACE_SECONDS %s does not fit docker stop's %d s"
                % (name, grace, DOCKER_STOP_TIMEOUT_S))
    c.check(env.get("RELSERVE_MODEL") == "default=/models/default",
            "%s: RELSERVE_MODEL is %r, expected default=/models/default" % (name, env.get("RELSERVE_MODEL")))
    if cuda:
        c.check(env.get("RELSERVE_DEVICE") == "cuda", "%s: RELSERVE_DEVICE is %r, expected cuda" % (name, env.get("RELSERVE_DEVICE")))
    else:
        c.check(env.get("RELSERVE_DEVICE", "cpu") == "cpu", "%s: RELSERVE_DEVICE %r" % (name, env.get("RELSERVE_DEVICE")))
    c.check("/opt/relserve/bin" in env.get("PATH", ""), "%s: /opt/relserve/bin is not on PATH" % name)
    if flags:
        for var in env:
            if var.startswith("RELSERVE_"):
                c.check(var in {env_var(f) for f in flags}, "%s: %s names no flag of relserve" % (name, var))
    entry = [exec_form(a) for i, a in runtime if i == "ENTRYPOINT"]
    c.check(entry == [["relserve"]], "%s: ENTRYPOINT %s, expected [\"relserve\"]" % (name, entry))
    cmd = [exec_form(a) for i, a in runtime if i == "CMD"]
    c.check(all(x == [] for x in cmd),
            "%s: CMD %s: flags in CMD are all replaced by a user's own (set defaults with ENV RELSERVE_...)" % (name, cmd))
    c.check(kinds.index("USER") < kinds.index("HEALTHCHECK") if "USER" in kinds and "HEALTHCHECK" in kinds else False,
            "%s: USER must come before HEALTHCHECK" % name)

    # relserve-client: built in the build stage, installed under /opt/relserve, copied over.
    build = [s for n, s in staged if n == "build"]
    if c.check(len(build) == 1, "%s: no stage named build" % name):
        bcopies = [a.split() for i, a in build[0] if i == "COPY"]
        c.check(any(w[-2:] == ["client", "/src/client"] for w in bcopies), "%s: the build stage does not copy client/" % name)
        runs = " ".join(a for i, a in build[0] if i == "RUN")
        c.check("cmake --install" in runs and "CMAKE_INSTALL_PREFIX=/opt/relserve" in runs,
                "%s: the build stage does not install into /opt/relserve" % name)
    c.check(any(a.split() == ["--from=build", "/opt/relserve", "/opt/relserve"] for a in copies),
            "%s: the runtime stage does not copy /opt/relserve from the build stage" % name)

    # The ports.
    exposed = sorted(int(p.split("/")[0]) for i, a in runtime if i == "EXPOSE" for p in a.split())
    c.check(exposed == [8080, 9090, 50051], "%s: EXPOSE %s" % (name, exposed))


def check_client_installed(c, root):
    with open(os.path.join(root, "client", "CMakeLists.txt")) as f:
        text = f.read()
    c.check(re.search(r"install\(TARGETS[^)]*\brelserve-client\b[^)]*DESTINATION bin", text) is not None,
            "client/CMakeLists.txt does not install relserve-client into bin")
    with open(os.path.join(root, "CMakeLists.txt")) as f:
        top = f.read()
    c.check(re.search(r"^add_subdirectory\(client\)", top, re.M) is not None,
            "CMakeLists.txt does not always build client/ (the image builds with RELSERVE_BUILD_TESTS=OFF)")
    for p in ("client/CMakeLists.txt", HEALTHCHECK_SRC):
        c.check(dockerignore_allows(root, p), ".dockerignore keeps %s out of the build context" % p)
    script = os.path.join(root, HEALTHCHECK_SRC)
    c.check(os.access(script, os.X_OK), "%s is not executable (COPY keeps the mode)" % HEALTHCHECK_SRC)
    r = subprocess.run(["git", "-C", root, "ls-files", "-s", HEALTHCHECK_SRC], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    if r.returncode == 0 and r.stdout.strip():
        c.check(r.stdout.startswith("100755"), "%s is not executable in git: %s" % (HEALTHCHECK_SRC, r.stdout.strip()))


def check_healthcheck_defaults(c, root, flags):
    """The script's defaults are relserve's."""
    path = os.path.join(root, HEALTHCHECK_SRC)
    if not c.check(os.path.isfile(path), "%s is missing" % HEALTHCHECK_SRC):
        return
    with open(path) as f:
        text = f.read()
    found = dict(re.findall(r"setting ([a-z-]+) ([^ )\"]+|\"\")", text))
    for flag in ("metrics-port", "metrics-address", "http-address", "grpc-address", "tls-cert"):
        c.check(flag in found, "%s does not read --%s" % (HEALTHCHECK_SRC, flag))
    if flags:
        for flag, default in found.items():
            want = flags.get(flag)
            got = "" if default == '""' else default
            c.check(want is not None and got == want,
                    "%s: default of --%s is %r, relserve's is %r" % (HEALTHCHECK_SRC, flag, got, want))


def check_readme(c, root):
    with open(os.path.join(root, "README.md")) as f:
        text = f.read()
    m = re.search(r"^## Docker\n(.*?)(?=^## )", text, re.M | re.S)
    if not c.check(m is not None, "README.md has no Docker section"):
        return
    section = m.group(1)
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    if not c.check(block is not None, "README.md's Docker section has no sh block"):
        return
    lines = [l for l in block.group(1).splitlines() if not l.lstrip().startswith("#")]
    code = "\n".join(l.split(" #")[0] for l in lines)
    c.check("build/" not in code, "README.md's Docker quick start uses build/ (a Docker-only user has none):\n" + code)
    lines = code.splitlines()
    # A fresh Debian 12 has no engine: the quick start installs one and starts it.
    c.check("install-deps.sh --docker" in code or re.search(r"apt-get install[^\n]*docker\.io", code) is not None,
            "README.md's Docker quick start does not install the engine (scripts/install-deps.sh --docker)")
    c.check("docker-engine.sh" in code, "README.md's Docker quick start does not start the engine (scripts/docker-engine.sh)")
    joined = re.sub(r"\\\n\s*", " ", code)
    made = re.search(r"docker run [^\n]*--entrypoint relserve-model [^\n]*relserve:latest create ", joined) is not None
    hub = re.search(r"--model \S+=[\w.-]+/[\w.-]+", joined) is not None
    c.check("path/to" not in code and (made or hub),
            "README.md's Docker quick start has no real model line (the image's relserve-model create, or a Hub id)")
    c.check(re.search(r"-p \"?\d+:\d+", code) is None,
            "README.md's Docker quick start publishes fixed ports: they must follow the flags:\n" + code)
    run = next((i for i, l in enumerate(lines) if l.startswith("docker run -d") and "relserve:latest" in "\n".join(lines[i:i + 3])), None)
    if not c.check(run is not None, "README.md's Docker quick start runs no relserve:latest container (docker run -d)"):
        return
    c.check("--rm" not in lines[run], "README.md's Docker quick start runs the server with --rm: a container that stops loses its log")
    c.check("docker logs" in code, "README.md's Docker quick start does not show the container's log when it stops")
    c.check("docker rm -v" in code, "README.md's Docker quick start does not remove its container with its volumes (docker rm -v)")
    waits = [i for i, l in enumerate(lines) if i > run and ("/healthz" in l or "Health.Status" in l)]
    calls = [i for i, l in enumerate(lines) if i > run and i not in waits and ("relserve-client" in l or "curl" in l)]
    c.check(bool(calls), "README.md's Docker quick start calls no server after docker run")
    c.check(bool(waits) and bool(calls) and waits[0] < calls[0],
            "README.md's Docker quick start does not wait for readiness (/healthz or Docker's health) before its first call")
    c.check(re.search(r"docker (exec \S+|run [^\n]*--network[= ]host[^\n]*) relserve-client", code) is not None,
            "README.md's Docker quick start does not call relserve-client inside the image (docker exec)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    ap.add_argument("--relserve", help="relserve, for its flags and defaults")
    opts = ap.parse_args()
    c = Checks()
    flags = {}
    if opts.relserve and os.access(opts.relserve, os.X_OK):
        flags = relserve_help(opts.relserve)
        c.check("shutdown-grace-seconds" in flags and "metrics-port" in flags, "relserve --help lists no flags")
    else:
        print("dockerfile_test: no relserve binary: the flag names and defaults are not compared")
    check_dockerfile(c, opts.root, "Dockerfile", flags, cuda=False)
    check_dockerfile(c, opts.root, "Dockerfile.cuda", flags, cuda=True)
    check_client_installed(c, opts.root)
    check_healthcheck_defaults(c, opts.root, flags)
    check_readme(c, opts.root)
    print("dockerfile_test: %d passed, %d failed" % (c.passed, len(c.failures)))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
