// ONNX Runtime (npm's onnxruntime-node, CPU provider) on an ONNX file written by export_onnx.py,
// for scripts/bench-ort.sh. onnxruntime-node is resolved from ORT_NODE_DIR (default build/ort-node,
// where bench-ort.sh installs scripts/ort/package.json with npm install --ignore-scripts).
//
//   node scripts/ort/run_ort.mjs --onnx M.onnx --batch 8 --seq 128 --iters 5 --warmup 1 --threads 2 --vocab 128100 [--spin 0]
//       one JSON line: median/min/mean ms per batch and tokens/s (from the median), random token
//       ids in [5, vocab), full attention mask; graphOptimizationLevel 'all', intraOp = threads, interOp 1
//   node scripts/ort/run_ort.mjs --onnx M.onnx --check M.onnx.check.json [--tolerance 1e-3]
//       runs export_onnx.py's check batch and prints max |ORT - transformers| per output (all
//       positions, and where attention_mask is 1); exits 1 past the tolerance
//   node scripts/ort/run_ort.mjs --onnx M.onnx --reference DIR
//       the same against a reference folder such as tests/data/reference/deberta_v3_like (inputs.json, expected.safetensors: transformers
//       4.40.2 computed in float64), on positions where attention_mask is 1
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const ortDir = path.resolve(process.env.ORT_NODE_DIR || path.join(here, '..', '..', 'build', 'ort-node'));
const require = createRequire(path.join(ortDir, 'package.json'));
let ort;
try {
  ort = require('onnxruntime-node');
} catch (e) {
  console.error(`run_ort.mjs: onnxruntime-node not found under ${ortDir}: ` +
    `cp scripts/ort/package.json ${ortDir}/ && (cd ${ortDir} && npm install --ignore-scripts)\n${e.message}`);
  process.exit(2);
}
const ortVersion = JSON.parse(fs.readFileSync(
  path.join(path.dirname(require.resolve('onnxruntime-node')), '..', 'package.json'), 'utf8')).version;

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i++) {
    if (!argv[i].startsWith('--')) throw new Error(`unexpected argument ${argv[i]}`);
    args[argv[i].slice(2)] = argv[i + 1];
    i++;
  }
  return args;
}

const args = parseArgs(process.argv.slice(2));
if (!args.onnx) {
  console.error('usage: run_ort.mjs --onnx FILE (--batch B --seq L [--iters N --warmup N --threads T --vocab V] | --check FILE | --reference DIR)');
  process.exit(2);
}
const threads = Number(args.threads ?? process.env.THREADS ?? 2);
// ORT's intra-op threads spin while waiting for work by default (fast on an idle machine, slow when
// other processes share the cores); --spin 0 turns that off.
const spin = String(args.spin ?? process.env.ORT_SPIN ?? '1') !== '0';
const loadStart = performance.now();
const session = await ort.InferenceSession.create(args.onnx, {
  executionProviders: ['cpu'],
  graphOptimizationLevel: 'all',
  intraOpNumThreads: threads,
  interOpNumThreads: 1,
  executionMode: 'sequential',
  ...(spin ? {} : { extra: { session: { intra_op: { allow_spinning: '0' } } } }),
});
const loadMs = performance.now() - loadStart;

function int64Tensor(rows) {
  const b = rows.length, l = rows[0].length;
  const data = new BigInt64Array(b * l);
  rows.forEach((row, i) => row.forEach((v, j) => { data[i * l + j] = BigInt(v); }));
  return new ort.Tensor('int64', data, [b, l]);
}

function maxDiff(actual, expected, dims, mask) {
  // dims [B, L, ...]: rows are positions; mask (B x L) selects positions where it is 1.
  let all = 0, masked = 0;
  const per = dims.slice(2).reduce((a, b) => a * b, 1);
  const l = dims.length >= 2 ? dims[1] : 1;
  for (let i = 0; i < expected.length; i++) {
    const d = Math.abs(actual[i] - expected[i]);
    if (!(d <= all)) all = Number.isNaN(d) ? Infinity : Math.max(all, d);
    const pos = Math.floor(i / per);
    const keep = dims.length < 3 || mask[Math.floor(pos / l)][pos % l] === 1;
    if (keep && !(d <= masked)) masked = Number.isNaN(d) ? Infinity : Math.max(masked, d);
  }
  return { all, masked };
}

function readSafetensors(file) {
  const buf = fs.readFileSync(file);
  const headerLen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + headerLen).toString('utf8'));
  const out = {};
  for (const [name, info] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    if (info.dtype !== 'F32') throw new Error(`${file}: ${name} is ${info.dtype}, only F32 is read`);
    const [s, e] = info.data_offsets;
    const bytes = buf.subarray(8 + headerLen + s, 8 + headerLen + e);
    const copy = new Float32Array(bytes.length / 4);
    for (let i = 0; i < copy.length; i++) copy[i] = bytes.readFloatLE(i * 4);
    out[name] = { dims: info.shape, data: copy };
  }
  return out;
}

async function compare(inputIds, attentionMask, expectedOutputs, tolerance, source) {
  const feeds = { input_ids: int64Tensor(inputIds), attention_mask: int64Tensor(attentionMask) };
  const results = await session.run(feeds);
  const report = { check: source, onnx: args.onnx, onnxruntime_node: ortVersion, shape: [inputIds.length, inputIds[0].length] };
  let ok = true;
  for (const [name, exp] of Object.entries(expectedOutputs)) {
    if (!results[name]) continue;
    const got = results[name];
    if (got.dims.join('x') !== exp.dims.join('x')) throw new Error(`${name}: ORT dims ${got.dims} vs expected ${exp.dims}`);
    const d = maxDiff(got.data, exp.data, exp.dims, attentionMask);
    report[`${name}_max_abs_diff`] = Number(d.all.toPrecision(3));
    report[`${name}_max_abs_diff_unpadded`] = Number(d.masked.toPrecision(3));
    if (!(d.masked <= tolerance)) ok = false;
  }
  report.tolerance = tolerance;
  report.ok = ok;
  console.log(JSON.stringify(report));
  process.exit(ok ? 0 : 1);
}

if (args.check) {
  const c = JSON.parse(fs.readFileSync(args.check, 'utf8'));
  await compare(c.input_ids, c.attention_mask, c.outputs, Number(args.tolerance ?? 1e-3),
    `transformers ${c.transformers_version} (torch ${c.torch_version}, float32)`);
} else if (args.reference) {
  const inputs = JSON.parse(fs.readFileSync(path.join(args.reference, 'inputs.json'), 'utf8'));
  const expected = readSafetensors(path.join(args.reference, 'expected.safetensors'));
  const wanted = {};
  for (const name of session.outputNames) if (expected[name]) wanted[name] = expected[name];
  await compare(inputs.input_ids, inputs.attention_mask, wanted, Number(args.tolerance ?? 1e-4),
    `${args.reference} (transformers 4.40.2, float64)`);
} else {
  const batch = Number(args.batch), seq = Number(args.seq);
  const iters = Number(args.iters ?? 5), warmup = Number(args.warmup ?? 1);
  const vocab = Number(args.vocab ?? 32000);
  if (!(batch > 0 && seq > 0 && iters > 0 && vocab > 5)) throw new Error('--batch, --seq, --iters and --vocab must be positive');
  let state = 0x2545f491;  // xorshift32: the same ids on every run
  const next = () => { state ^= state << 13; state >>>= 0; state ^= state >>> 17; state ^= state << 5; state >>>= 0; return state; };
  const ids = new BigInt64Array(batch * seq);
  for (let i = 0; i < ids.length; i++) ids[i] = BigInt(5 + (next() % (vocab - 5)));
  const mask = new BigInt64Array(batch * seq).fill(1n);
  const feeds = {
    input_ids: new ort.Tensor('int64', ids, [batch, seq]),
    attention_mask: new ort.Tensor('int64', mask, [batch, seq]),
  };
  for (let i = 0; i < warmup; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    await session.run(feeds);
    times.push(performance.now() - t0);
  }
  const sorted = [...times].sort((a, b) => a - b);
  const median = sorted.length % 2 ? sorted[(sorted.length - 1) / 2]
    : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2;
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  console.log(JSON.stringify({
    runtime: 'onnxruntime-node', onnxruntime_node: ortVersion, provider: 'cpu', onnx: args.onnx,
    batch, seq, threads, inter_op_threads: 1, spinning: spin, iters, warmup,
    ms_per_batch_median: median, ms_per_batch_min: sorted[0], ms_per_batch_mean: mean,
    tokens_per_second: (batch * seq) / (median / 1000), load_ms: loadMs,
  }));
}
