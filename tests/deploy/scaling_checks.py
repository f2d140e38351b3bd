"""Checks of deploy/'s scaling on the queue, for deploy_test.py: the KEDA component
(deploy/components/keda: a ScaledObject in place of the HPA) and the KServe example
(deploy/kserve: a ClusterServingRuntime and an InferenceService), each object against the subset
of its CRD's published schema in crd_schemas.yaml, and against relserve's flags; the PromQL they
scale on is returned for the comparison with a running relserve's /metrics."""

import os

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
KEDA = "components/keda"
KSERVE = "kserve"
NAMESPACE = "relserve"
# KServe's names (pkg/constants/constants.go).
KSERVE_SCRAPE = "serving.kserve.io/enable-prometheus-scraping"
KSERVE_PORT = "prometheus.kserve.io/port"
KSERVE_PATH = "prometheus.kserve.io/path"
KSERVE_MODE = "serving.kserve.io/deploymentMode"
KSERVE_AUTOSCALER = "serving.kserve.io/autoscalerClass"


def load_schemas(path=os.path.join(HERE, "crd_schemas.yaml")):
    with open(path) as f:
        return yaml.safe_load(f)


def _type_ok(value, schema):
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    t = schema.get("type")
    if t is None:
        if "anyOf" in schema:
            return any(_type_ok(value, a) for a in schema["anyOf"])
        return True
    return {"object": lambda v: isinstance(v, dict),
            "array": lambda v: isinstance(v, list),
            "string": lambda v: isinstance(v, str),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "boolean": lambda v: isinstance(v, bool)}[t](value)


def validate(value, schema, where):
    """Problems of value against an OpenAPI v3 schema as CRDs write it: types, enums, required
    fields and fields the schema does not define."""
    if not _type_ok(value, schema):
        return ["%s: %r is not of type %s" % (where, value, schema.get("type", schema.get("anyOf")))]
    problems = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append("%s: %r is not one of %s" % (where, value, schema["enum"]))
    if isinstance(value, dict):
        for field in schema.get("required", []):
            if field not in value:
                problems.append("%s: the required field %s is missing" % (where, field))
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            if props is not None and k in props:
                problems += validate(v, props[k], "%s.%s" % (where, k))
            elif isinstance(extra, dict):
                problems += validate(v, extra, "%s.%s" % (where, k))
            elif props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                problems.append("%s: unknown field %s (the CRD defines %s)" % (where, k, ", ".join(sorted(props))))
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            problems += validate(v, schema["items"], "%s[%d]" % (where, i))
    return problems


def check_crd_object(obj, schemas):
    """The object against its kind's schema: group/version, scope, then the fields."""
    kind = obj.get("kind")
    where = "%s %s" % (kind, obj.get("metadata", {}).get("name"))
    s = schemas.get(kind)
    if s is None:
        return ["%s: no schema for the kind in crd_schemas.yaml" % where]
    problems = []
    want = "%s/%s" % (s["group"], s["version"])
    if obj.get("apiVersion") != want:
        problems.append("%s: apiVersion %s, the CRD serves %s" % (where, obj.get("apiVersion"), want))
    ns = obj.get("metadata", {}).get("namespace")
    if s["scope"] == "Cluster" and ns is not None:
        problems.append("%s: cluster-scoped, but has namespace %s" % (where, ns))
    if s["scope"] == "Namespaced" and ns != NAMESPACE:
        problems.append("%s: namespace %s, expected %s" % (where, ns, NAMESPACE))
    return problems + validate(obj, s["schema"], where)


def _port(address):
    return int(str(address).rsplit(":", 1)[-1])


def check_keda(name, objs, deployment, schemas):
    """One render with components/keda: the ScaledObject replaces the HPA and scales the
    Deployment on a Prometheus query. (problems, [(where, query)])"""
    problems, queries = [], []
    hpas = [o for o in objs if o["kind"] == "HorizontalPodAutoscaler"]
    if hpas:
        problems.append("%s: an HPA beside the ScaledObject (KEDA makes its own; two would fight)" % name)
    sos = [o for o in objs if o["kind"] == "ScaledObject"]
    if len(sos) != 1:
        return problems + ["%s: %d ScaledObjects, expected 1" % (name, len(sos))], queries
    so = sos[0]
    problems += ["%s: %s" % (name, p) for p in check_crd_object(so, schemas)]
    spec = so.get("spec", {})
    ref = spec.get("scaleTargetRef", {})
    if (ref.get("name"), ref.get("kind", "Deployment"), ref.get("apiVersion", "apps/v1")) != \
            (deployment["metadata"]["name"], "Deployment", "apps/v1"):
        problems.append("%s: the ScaledObject scales %s, not the Deployment %s" % (name, ref, deployment["metadata"]["name"]))
    if spec.get("minReplicaCount", 0) < 2:
        problems.append("%s: ScaledObject minReplicaCount < 2 leaves the PodDisruptionBudget no room" % name)
    if spec.get("maxReplicaCount", 100) < spec.get("minReplicaCount", 0):
        problems.append("%s: ScaledObject maxReplicaCount below minReplicaCount" % name)
    triggers = spec.get("triggers", [])
    if [t.get("type") for t in triggers] != ["prometheus"]:
        problems.append("%s: the ScaledObject must scale on one prometheus trigger: %s" % (name, [t.get("type") for t in triggers]))
    for t in triggers:
        md = t.get("metadata", {})
        for field in ("serverAddress", "query", "threshold"):
            if not md.get(field):
                problems.append("%s: the prometheus trigger has no %s" % (name, field))
        try:
            if float(md.get("threshold", "0")) <= 0:
                problems.append("%s: the prometheus trigger's threshold must be above 0" % name)
        except ValueError:
            problems.append("%s: the prometheus trigger's threshold %r is not a number" % (name, md.get("threshold")))
        if 'namespace="%s"' % NAMESPACE not in md.get("query", "").replace(" ", ""):
            problems.append("%s: the trigger's query does not select namespace=\"%s\": it would count other "
                            "deployments' relserve" % (name, NAMESPACE))
        queries.append(("%s ScaledObject trigger %s" % (name, t.get("name")), md.get("query", "")))
    return problems, queries


def check_kserve(objs, flags, schemas):
    """deploy/kserve rendered: the ClusterServingRuntime runs relserve with flags it accepts,
    its HTTP port is the one KServe routes to, probes and scrape annotations follow the flags;
    the InferenceService names the runtime and a format it supports, and scales with KEDA on
    a Prometheus query. (problems, [(where, query)])"""
    problems, queries = [], []
    for o in objs:
        if o["kind"] in schemas:
            problems += check_crd_object(o, schemas)
    runtimes = [o for o in objs if o["kind"] == "ClusterServingRuntime"]
    services = [o for o in objs if o["kind"] == "InferenceService"]
    if len(runtimes) != 1 or len(services) != 1:
        return problems + ["kserve: %d ClusterServingRuntimes and %d InferenceServices, expected 1 and 1"
                           % (len(runtimes), len(services))], queries
    rt, isvc = runtimes[0], services[0]
    spec = rt.get("spec", {})
    ctrs = spec.get("containers", [])
    if len(ctrs) != 1 or ctrs[0].get("name") != "kserve-container":
        return problems + ["kserve: the runtime needs one container named kserve-container (KServe's name)"], queries
    ctr = ctrs[0]
    if ctr.get("image") != "relserve:latest" or ctr.get("imagePullPolicy") != "IfNotPresent":
        problems.append("kserve: the runtime runs %s (%s), expected relserve:latest with IfNotPresent"
                        % (ctr.get("image"), ctr.get("imagePullPolicy")))
    args, arg, i = ctr.get("args", []), {}, 0
    models = []
    while i < len(args):
        a = str(args[i])
        if not a.startswith("--") or i + 1 >= len(args):
            problems.append("kserve: stray argument %r" % a)
            i += 1
            continue
        flag, value = a[2:], str(args[i + 1])
        if flag not in flags:
            problems.append("kserve: relserve has no flag --%s" % flag)
        if flag == "model":
            models.append(value)
        arg[flag] = value
        i += 2
    if models != ["{{.Name}}=/mnt/models"]:
        problems.append("kserve: the runtime must serve KServe's model directory /mnt/models under the "
                        "InferenceService's name ({{.Name}}=/mnt/models): %s" % models)
    ports = ctr.get("ports", [])
    http = _port(arg.get("http-address", "0.0.0.0:8080"))
    if [p.get("containerPort") for p in ports] != [http]:
        problems.append("kserve: the runtime's one container port must be the HTTP API's (--http-address port %d): %s"
                        % (http, ports))
    grpc = _port(arg.get("grpc-address", "0.0.0.0:50051"))
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        port = ctr.get(probe, {}).get("grpc", {}).get("port")
        if port != grpc:
            problems.append("kserve: %s is not a gRPC probe on --grpc-address's port %d: %s" % (probe, grpc, ctr.get(probe)))
    ann = spec.get("annotations", {})
    metrics_port = str(arg.get("metrics-port", "9090"))
    if ann.get(KSERVE_PORT) != metrics_port or ann.get(KSERVE_PATH, "/metrics") != "/metrics":
        problems.append("kserve: the runtime's %s/%s (%s, %s) are not --metrics-port %s and /metrics"
                        % (KSERVE_PORT, KSERVE_PATH, ann.get(KSERVE_PORT), ann.get(KSERVE_PATH), metrics_port))
    if arg.get("metrics-address", "0.0.0.0") in ("127.0.0.1", "localhost"):
        problems.append("kserve: --metrics-address is loopback: Prometheus cannot scrape it")

    meta = isvc.get("metadata", {})
    iann = meta.get("annotations", {})
    if iann.get(KSERVE_SCRAPE) != "true":
        problems.append("kserve: the InferenceService does not ask for the scrape annotations (%s)" % KSERVE_SCRAPE)
    if iann.get(KSERVE_MODE) not in ("Standard", "RawDeployment"):
        problems.append("kserve: the InferenceService is not in Standard (raw Deployment) mode: %s" % iann.get(KSERVE_MODE))
    if iann.get(KSERVE_AUTOSCALER) != "keda":
        problems.append("kserve: the InferenceService does not scale with KEDA (%s)" % KSERVE_AUTOSCALER)
    pred = isvc.get("spec", {}).get("predictor", {})
    model = pred.get("model", {})
    if model.get("runtime") != rt["metadata"]["name"]:
        problems.append("kserve: the InferenceService names runtime %s, not %s" % (model.get("runtime"), rt["metadata"]["name"]))
    formats = {f.get("name") for f in spec.get("supportedModelFormats", [])}
    if model.get("modelFormat", {}).get("name") not in formats:
        problems.append("kserve: the InferenceService's model format %s is not one the runtime supports (%s)"
                        % (model.get("modelFormat"), sorted(formats)))
    if not model.get("storageUri"):
        problems.append("kserve: the InferenceService has no storageUri")
    if pred.get("minReplicas", 1) < 2:
        problems.append("kserve: the InferenceService's minReplicas < 2")
    metrics = pred.get("autoScaling", {}).get("metrics", [])
    for m in metrics:
        ext = m.get("external", {})
        if m.get("type") != "External" or ext.get("metric", {}).get("backend") != "prometheus":
            problems.append("kserve: an autoscaling metric that is not an External prometheus query: %s" % m)
            continue
        query = ext["metric"].get("query", "")
        if 'namespace="%s"' % NAMESPACE not in query.replace(" ", "") or meta["name"] not in query:
            problems.append("kserve: the autoscaling query does not select this InferenceService's pods: %s" % query)
        queries.append(("kserve InferenceService %s autoscaling" % meta["name"], query))
    if not metrics:
        problems.append("kserve: the InferenceService has no autoscaling metric")
    return problems, queries
