// The official client packages from npm (pinned in package.json) against a running relserve:
// openai, @langchain/openai, @huggingface/inference, cohere-ai (v1 and v2 clients) and
// @grpc/grpc-js with @grpc/proto-loader. Every embedding a client returns must equal what
// relserve's gRPC Embed returns for the same text (1e-6), and where the client can send token ids,
// what transformers 4.40.2 computes for the reference model (tests/data/reference, 1e-4, as the
// C++ reference tests). Plain node:assert; Node 18 features only. Run by real_clients_test.sh:
//
//   node real_clients_test.mjs CONFIG_JSON
//
// CONFIG_JSON: {"url": "http://127.0.0.1:P" (the server: models ref, cls, reranker; ref the
// default; and nli), "classifier_url": a second server whose default model is cls, "nli_url": a third
// serving nli (the classifier with MNLI's label names) alone, "ner_url": a fourth serving the token
// classifier tests/data/ner/ner_bert alone (its gRPC port: "ner_grpc"), "grpc": "127.0.0.1:P", "api_key", "proto":
// ".../proto/relserve/v1/encoder.proto", "reference": ".../tests/data/reference", "ner_expected":
// ".../tests/data/ner/ner_expected.json" (transformers' TokenClassificationPipeline's answers)}
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import OpenAI from 'openai';
import { OpenAIEmbeddings } from '@langchain/openai';
import { InferenceClient, HfInference } from '@huggingface/inference';
import { CohereClient, CohereClientV2, CohereError } from 'cohere-ai';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

const config = JSON.parse(process.argv[2]);
const { url, classifier_url: classifierUrl, nli_url: nliUrl, ner_url: nerUrl, api_key: apiKey } = config;
// Installed versions, read beside this script (the driver copies it next to node_modules).
const versionOf = (name) => JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url), 'utf8')).version;

// Agreement between two of relserve's own routes (same engine, same text): 1e-6.
const SAME = 1e-6;
// Against transformers' float64 reference: the C++ reference tests' bound.
const REFERENCE = 1e-4;

let checks = 0;
const worst = new Map();  // tolerance -> largest difference seen under it
function ok(what) {
  checks += 1;
  console.log(`ok ${checks} - ${what}`);
}

function assertClose(got, want, tol, what) {
  assert.equal(got.length, want.length, `${what}: length ${got.length}, expected ${want.length}`);
  let most = 0;
  let at = -1;
  for (let i = 0; i < want.length; i++) {
    assert.equal(typeof got[i], 'number', `${what}: value ${i} is ${typeof got[i]}`);
    const d = Math.abs(got[i] - want[i]);
    if (!(d <= most)) { most = d; at = i; }
  }
  assert.ok(most <= tol, `${what}: differs by ${most} at ${at} (${got[at]} vs ${want[at]}), more than ${tol}`);
  worst.set(tol, Math.max(worst.get(tol) ?? 0, most));
}

function norm(v) { return Math.sqrt(v.reduce((s, x) => s + x * x, 0)); }
function normalize(v) { const n = norm(v); return Array.from(v, (x) => x / n); }
function assertUnit(v, what) { assert.ok(Math.abs(norm(v) - 1) < 1e-5, `${what}: norm ${norm(v)}, expected 1`); }

// --- The reference: transformers 4.40.2's last hidden states for 4 rows of token ids ---------

function readSafetensors(path) {
  const buf = readFileSync(path);
  const headerLen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + headerLen).toString('utf8'));
  const tensors = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    assert.equal(t.dtype, 'F32', `${path}: ${name} is ${t.dtype}`);
    const [begin, end] = t.data_offsets;
    const bytes = buf.subarray(8 + headerLen + begin, 8 + headerLen + end);
    const data = new Float32Array(bytes.length / 4);
    for (let i = 0; i < data.length; i++) data[i] = bytes.readFloatLE(i * 4);
    tensors[name] = { shape: t.shape, data };
  }
  return tensors;
}

// Each row's unpadded token ids, and the mean of transformers' last hidden state over them
// (relserve's pooling for a model without sentence-transformers files).
function referenceRows(dir) {
  const inputs = JSON.parse(readFileSync(`${dir}/inputs.json`, 'utf8'));
  const expected = readSafetensors(`${dir}/expected.safetensors`);
  const last = expected.last_hidden_state;
  const [, length, hidden] = last.shape;
  return inputs.input_ids.map((row, b) => {
    const n = inputs.attention_mask[b].reduce((s, m) => s + m, 0);
    const pooled = new Array(hidden).fill(0);
    for (let t = 0; t < n; t++) {
      for (let h = 0; h < hidden; h++) pooled[h] += last.data[(b * length + t) * hidden + h];
    }
    const labels = expected.logits ? expected.logits.shape[1] : 0;
    const logits = labels ? Array.from(expected.logits.data.subarray(b * labels, (b + 1) * labels)) : null;
    return { ids: row.slice(0, n), pooled: pooled.map((x) => x / n), logits };
  });
}

const reference = referenceRows(`${config.reference}/deberta_v3_like`);
const referenceCls = referenceRows(`${config.reference}/deberta_v3_cls`);
assert.deepEqual(reference.map((r) => r.ids.length), [160, 61, 17, 1]);

// --- A fetch that records what a client sends ----------------------------------------------

function recordingFetch(log) {
  return async (input, init = {}) => {
    const target = typeof input === 'string' ? input : (input.url ?? String(input));
    let body = init.body;
    if (typeof body === 'string') { try { body = JSON.parse(body); } catch { /* not JSON */ } }
    const headers = new Headers(init.headers ?? {});
    log.push({ url: target, method: init.method, body, authorization: headers.get('authorization') });
    // Node-fetch style options (openai 4's `agent`) mean nothing to the global fetch.
    const { agent, ...rest } = init;
    void agent;
    return fetch(input, rest);
  };
}

// --- gRPC: @grpc/grpc-js with @grpc/proto-loader on the project's proto ---------------------

const packageDefinition = protoLoader.loadSync(config.proto, {
  keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true,
});
const relserveProto = grpc.loadPackageDefinition(packageDefinition).relserve.v1;
const encoder = new relserveProto.Encoder(config.grpc, grpc.credentials.createInsecure(),
  { 'grpc.enable_http_proxy': 0 });

function call(method, request, key = apiKey, client = encoder) {
  const metadata = new grpc.Metadata();
  if (key !== null) metadata.set('authorization', `Bearer ${key}`);
  return new Promise((resolve, reject) => {
    client[method](request, metadata, { deadline: Date.now() + 30000 }, (err, response) => (err ? reject(err) : resolve(response)));
  });
}

const texts = [
  'What is relserve?',
  'relserve serves relative-attention encoders to other services.',
  'A bowl of hot soup, ünïcödé and 漢字 included.',
];
const query = 'what is relserve?';
const documents = ['a model server for encoders', 'a bowl of hot soup', 'relserve is a gRPC and HTTP server'];

async function grpcEmbed(inputs, { model = 'ref', normalize: norm = true, dimensions = 0 } = {}) {
  const r = await call('Embed', { model, inputs: inputs.map((t) => ({ text: t })), normalize: norm, dimensions });
  return r.embeddings.map((e) => e.values);
}

async function grpcTests() {
  const models = await call('ListModels', {});
  const byName = Object.fromEntries(models.models.map((m) => [m.name, m]));
  assert.deepEqual(Object.keys(byName).sort(), ['cls', 'colbert', 'nli', 'ref', 'reranker']);
  assert.equal(byName.colbert.multi_vector, 'colbert');
  assert.equal(byName.ref.hidden_size, 32);
  assert.equal(byName.ref.architecture, 'DebertaV2Model');
  assert.equal(byName.ref.pooling, 'mean');
  assert.equal(byName.ref.has_tokenizer, true);
  assert.deepEqual(byName.cls.labels, ['LABEL_0', 'LABEL_1', 'LABEL_2']);
  assert.equal(byName.nli.entailment_label, 'entailment');
  assert.equal(byName.cls.entailment_label, '');
  ok('grpc ListModels: ref, cls, reranker and nli with their architecture, pooling, labels and entailment label');

  // The reference rows as token ids: mean pooling of transformers' last hidden state.
  const emb = await call('Embed', { model: 'ref', inputs: reference.map((r) => ({ tokens: { ids: r.ids } })), normalize: false });
  assert.equal(emb.model, 'ref');
  emb.embeddings.forEach((e, i) => {
    assert.equal(e.num_tokens, reference[i].ids.length);
    assertClose(e.values, reference[i].pooled, REFERENCE, `grpc Embed reference row ${i}`);
  });
  const embNorm = await call('Embed', { model: 'ref', inputs: reference.map((r) => ({ tokens: { ids: r.ids } })), normalize: true });
  embNorm.embeddings.forEach((e, i) => assertClose(e.values, normalize(reference[i].pooled), REFERENCE, `grpc Embed normalize row ${i}`));
  ok('grpc Embed: the 4 reference rows (160, 61, 17, 1 tokens) equal transformers\' mean-pooled output, raw and normalised');

  const cls = await call('Classify', { model: 'cls', inputs: referenceCls.map((r) => ({ tokens: { ids: r.ids } })), raw_scores: true });
  cls.results.forEach((c, i) => assertClose(c.logits, referenceCls[i].logits, REFERENCE, `grpc Classify logits row ${i}`));
  ok('grpc Classify: the reference classifier\'s logits equal transformers\'');

  const rr = await call('Rerank', { model: 'reranker', query, documents });
  assert.equal(rr.results.length, documents.length);
  for (let i = 1; i < rr.results.length; i++) assert.ok(rr.results[i - 1].score >= rr.results[i].score, 'grpc Rerank is best first');
  ok('grpc Rerank: every document scored, best first');

  await assert.rejects(call('ListModels', {}, 'wrong-key'), (e) => e.code === grpc.status.UNAUTHENTICATED);
  await assert.rejects(call('Embed', { inputs: [{ text: 'x' }] }, null), (e) => e.code === grpc.status.UNAUTHENTICATED && /missing/i.test(e.details));
  ok('grpc: a wrong or missing API key is UNAUTHENTICATED');
  return rr;
}

// --- openai ------------------------------------------------------------------------------------

async function openaiTests(want, want8) {
  for (const baseURL of [`${url}/v1`, url]) {
    const log = [];
    const client = new OpenAI({ apiKey, baseURL, maxRetries: 0, fetch: recordingFetch(log) });
    const path = baseURL.endsWith('/v1') ? '/v1/embeddings' : '/embeddings';

    const floats = await client.embeddings.create({ model: 'ref', input: texts, encoding_format: 'float' });
    assert.equal(floats.object, 'list');
    assert.equal(floats.model, 'ref');
    assert.ok(floats.usage.prompt_tokens > 0 && floats.usage.total_tokens === floats.usage.prompt_tokens);
    floats.data.forEach((d, i) => {
      assert.equal(d.object, 'embedding');
      assert.equal(d.index, i);
      assertUnit(d.embedding, `openai float ${i}`);
      assertClose(d.embedding, want[i], SAME, `openai ${baseURL} float ${i}`);
    });
    assert.equal(new URL(log[0].url).pathname, path);
    assert.equal(log[0].authorization, `Bearer ${apiKey}`);

    // No encoding_format: the client asks for base64 and decodes it itself.
    const decoded = await client.embeddings.create({ model: 'ref', input: texts });
    assert.equal(log[1].body.encoding_format, 'base64');
    decoded.data.forEach((d, i) => assertClose(Array.from(d.embedding), floats.data[i].embedding, 0, `openai decoded base64 ${i}`));

    const b64 = await client.embeddings.create({ model: 'ref', input: texts[0], encoding_format: 'base64' });
    assert.equal(typeof b64.data[0].embedding, 'string');
    const bytes = Buffer.from(b64.data[0].embedding, 'base64');
    const values = Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4));
    assertClose(values, want[0], SAME, 'openai base64 (little-endian float32)');

    const short = await client.embeddings.create({ model: 'ref', input: texts, dimensions: 8, encoding_format: 'float' });
    short.data.forEach((d, i) => {
      assert.equal(d.embedding.length, 8);
      assertUnit(d.embedding, `openai dimensions ${i}`);
      assertClose(d.embedding, want8[i], SAME, `openai dimensions 8 ${i}`);
    });
    ok(`openai ${versionOf('openai')} baseURL ${path.replace('/embeddings', '') || '/'} (POST ${path}): float, base64 (decoded by the client and by hand) and dimensions 8 equal gRPC Embed`);
  }

  const client = new OpenAI({ apiKey, baseURL: `${url}/v1`, maxRetries: 0 });
  const ids = await client.embeddings.create({ model: 'ref', input: reference.map((r) => r.ids), encoding_format: 'float' });
  ids.data.forEach((d, i) => assertClose(d.embedding, normalize(reference[i].pooled), REFERENCE, `openai token ids row ${i}`));
  assert.equal(ids.usage.prompt_tokens, 160 + 61 + 17 + 1);
  ok('openai: the reference rows sent as token ids equal transformers\' output (normalised)');

  await assert.rejects(client.embeddings.create({ model: 'no-such-model', input: 'x' }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && /no-such-model/.test(e.message));
  const wrong = new OpenAI({ apiKey: 'wrong-key', baseURL: `${url}/v1`, maxRetries: 0 });
  await assert.rejects(wrong.embeddings.create({ model: 'ref', input: 'x' }),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  ok('openai: an unknown model is NotFoundError (404), a wrong key AuthenticationError (401)');

  // An input longer than the model's 512 tokens: cut by the server's default (--auto-truncate
  // true, as TEI 1.9's), refused as OpenAI refuses it where the server says --auto-truncate false:
  // 400 invalid_request_error about `input`, which the client raises as BadRequestError.
  const long = 'word '.repeat(700);
  const cut = await client.embeddings.create({ model: 'ref', input: long });
  assert.equal(cut.usage.prompt_tokens, 512);
  const refusing = new OpenAI({ apiKey, baseURL: `${classifierUrl}/v1`, maxRetries: 0 });
  await assert.rejects(refusing.embeddings.create({ model: 'cls', input: ['short', long] }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.type === 'invalid_request_error' &&
      e.param === 'input' && /max_length 512/.test(e.message));
  ok('openai: an over-long input is cut at 512 tokens by default, and with --auto-truncate false is BadRequestError (400, invalid_request_error, param input)');
}

// --- @langchain/openai -------------------------------------------------------------------------

async function langchainTests(want, want8) {
  const log = [];
  const embeddings = new OpenAIEmbeddings({
    model: 'ref', apiKey, maxRetries: 0,
    configuration: { baseURL: `${url}/v1`, fetch: recordingFetch(log) },
  });
  const docs = await embeddings.embedDocuments(texts);
  docs.forEach((d, i) => assertClose(d, want[i], SAME, `langchain embedDocuments ${i}`));
  const q = await embeddings.embedQuery(texts[0]);
  assertClose(q, want[0], SAME, 'langchain embedQuery');
  // LangChain.js sends text (Python's OpenAIEmbeddings needs check_embedding_ctx_length=False
  // for that; the JS class has no such setting and never sends tiktoken ids).
  assert.deepEqual(log[0].body.input, texts);
  assert.equal(log[1].body.input, texts[0]);
  assert.equal(new URL(log[0].url).pathname, '/v1/embeddings');

  const short = new OpenAIEmbeddings({ model: 'ref', apiKey, dimensions: 8, maxRetries: 0, configuration: { baseURL: `${url}/v1` } });
  (await short.embedDocuments(texts)).forEach((d, i) => assertClose(d, want8[i], SAME, `langchain dimensions ${i}`));
  const inner = versionOf('@langchain/openai/node_modules/openai');
  ok(`@langchain/openai ${versionOf('@langchain/openai')} (openai ${inner}): embedDocuments, embedQuery (text, not token ids) and dimensions 8 equal gRPC Embed`);
}

// --- @huggingface/inference --------------------------------------------------------------------

async function huggingfaceTests(want, wantRaw, wantClass) {
  const log = [];
  // The TEI endpoint at the server's root: POST / embeds with the default model (ref).
  const hf = new InferenceClient(apiKey, { fetch: recordingFetch(log) }).endpoint(url);
  const out = await hf.featureExtraction({ inputs: texts });
  out.forEach((v, i) => assertClose(v, want[i], SAME, `huggingface featureExtraction ${i}`));
  assert.equal(log[0].url, url);
  assert.deepEqual(log[0].body, { inputs: texts });
  assert.equal(log[0].authorization, `Bearer ${apiKey}`);

  const raw = await hf.featureExtraction({ inputs: texts, normalize: false });
  raw.forEach((v, i) => assertClose(v, wantRaw[i], SAME * Math.max(1, ...wantRaw[i].map(Math.abs)), `huggingface normalize false ${i}`));

  // endpointUrl per call, at TEI's /embed; token ids (TEI takes them) against the reference.
  const legacy = new HfInference(apiKey);
  const ids = await legacy.featureExtraction({ endpointUrl: `${url}/embed`, inputs: reference.map((r) => r.ids), normalize: false });
  ids.forEach((v, i) => assertClose(v, reference[i].pooled, REFERENCE, `huggingface token ids row ${i}`));
  ok(`@huggingface/inference ${versionOf('@huggingface/inference')}: featureExtraction at the root (POST /) and at /embed, normalised and raw, equals gRPC Embed; token ids equal transformers' output`);

  // text-classification at a TEI endpoint serving the classifier. The client reads the Inference
  // API's [[{label, score}]]; TEI's /predict answers a single text with [{label, score}] (so a
  // plain string fails against TEI as it does here) and a batch of one, [[text]], with [[...]].
  const clsLog = [];
  const hfc = new InferenceClient(apiKey, { fetch: recordingFetch(clsLog) }).endpoint(classifierUrl);
  const labels = await hfc.textClassification({ inputs: [[texts[0]]] });
  assert.equal(clsLog[0].url, classifierUrl);
  assert.deepEqual(labels.map((l) => l.label), wantClass.map((l) => l.label));
  assertClose(labels.map((l) => l.score), wantClass.map((l) => l.score), SAME, 'huggingface textClassification');
  const atPredict = await new HfInference(apiKey).textClassification({ endpointUrl: `${classifierUrl}/predict`, inputs: [[texts[0]]] });
  assert.deepEqual(atPredict, labels);
  ok('@huggingface/inference: textClassification at the root (POST /) and at /predict equals gRPC Classify');

  await assert.rejects(hf.featureExtraction({ inputs: [] }),
    (e) => e.name === 'ProviderApiError' && e.httpResponse.status === 400 && /inputs/.test(e.message));
  ok('@huggingface/inference: an empty input is a ProviderApiError (400) carrying TEI\'s error message');
}

// --- zero-shot classification: @huggingface/inference's zeroShotClassification -------------------

// transformers' ZeroShotClassificationPipeline.postprocess over the NLI model's logits for each
// (text, hypothesis) pair, from gRPC Classify: label -> score.
async function pipelineScores(text, labels, template, multi) {
  const logits = [];
  for (const l of labels) {
    const r = await call('Classify', { model: 'nli', inputs: [{ pair: { first: text, second: template.replace('{}', l) } }] });
    logits.push(r.results[0].logits);
  }
  const entail = 2, contradiction = 0;  // id2label: contradiction, neutral, entailment
  const z = logits.reduce((s, l) => s + Math.exp(l[entail]), 0);
  return new Map(labels.map((l, k) => [l, multi || labels.length === 1
    ? Math.exp(logits[k][entail]) / (Math.exp(logits[k][entail]) + Math.exp(logits[k][contradiction]))
    : Math.exp(logits[k][entail]) / z]));
}

function assertZeroShot(got, want, what) {
  assert.equal(got.length, want.size, `${what}: ${got.length} labels`);
  got.forEach((g, j) => {
    assert.ok(want.has(g.label), `${what}: unknown label ${g.label}`);
    assertClose([g.score], [want.get(g.label)], SAME, `${what} ${g.label}`);
    if (j > 0) assert.ok(got[j - 1].score >= g.score, `${what}: not best first`);
  });
}

async function zeroShotTests() {
  const text = texts[1];
  const labels = ['software', 'cooking', 'sports'];
  const log = [];
  // The Inference API endpoint's root: POST / with candidate_labels is zero-shot classification.
  const hf = new InferenceClient(apiKey, { fetch: recordingFetch(log) }).endpoint(nliUrl);
  const single = await hf.zeroShotClassification({ inputs: text, parameters: { candidate_labels: labels } });
  assert.equal(log[0].url, nliUrl);
  assert.deepEqual(log[0].body, { inputs: text, parameters: { candidate_labels: labels } });
  assertZeroShot(single, await pipelineScores(text, labels, 'This example is {}.', false), 'zeroShotClassification');
  assertClose([single.reduce((s, g) => s + g.score, 0)], [1], 1e-5, 'zero-shot single-label scores sum');

  // endpointUrl at /zero-shot-classification, multi_label and a template of one's own.
  const multi = await new HfInference(apiKey).zeroShotClassification({
    endpointUrl: `${nliUrl}/zero-shot-classification`, inputs: text,
    parameters: { candidate_labels: labels, multi_label: true, hypothesis_template: 'The topic is {}.' },
  });
  assertZeroShot(multi, await pipelineScores(text, labels, 'The topic is {}.', true), 'zeroShotClassification multi_label');

  // gRPC ZeroShotClassify gives the same.
  const g = await call('ZeroShotClassify', { model: 'nli', sequences: [text], candidate_labels: labels });
  assert.deepEqual(g.results[0].labels.map((l) => l.label), single.map((l) => l.label));
  g.results[0].labels.forEach((l, j) => assertClose([l.score], [single[j].score], SAME, `gRPC ZeroShotClassify ${l.label}`));
  ok(`@huggingface/inference ${versionOf('@huggingface/inference')}: zeroShotClassification at the root and at /zero-shot-classification (multi_label, hypothesis_template) equals transformers' pipeline formulas over gRPC Classify's logits, and gRPC ZeroShotClassify`);

  await assert.rejects(hf.zeroShotClassification({ inputs: text, parameters: { candidate_labels: [] } }),
    (e) => e.name === 'ProviderApiError' && e.httpResponse.status === 400 && /candidate_labels/.test(e.message));
  ok('@huggingface/inference: empty candidate_labels are a ProviderApiError (400) naming the field');
}

// --- token classification: @huggingface/inference's tokenClassification ---------------------------

// The entities as transformers' TokenClassificationPipeline gives them (ner_expected.json):
// labels, words and offsets exact, scores within 1e-5 (the reference ran in float64).
function assertEntities(got, want, what) {
  assert.equal(got.length, want.length, `${what}: ${got.length} entities, expected ${want.length}`);
  got.forEach((g, i) => {
    for (const key of ['entity_group', 'entity', 'index', 'word', 'start', 'end']) {
      assert.equal(g[key], want[i][key], `${what} [${i}].${key}`);
    }
    assert.ok(Math.abs(g.score - want[i].score) <= 1e-5, `${what} [${i}]: score ${g.score}, expected ${want[i].score}`);
  });
}

async function tokenClassificationTests() {
  const expected = JSON.parse(readFileSync(config.ner_expected, 'utf8')).models.ner_bert.texts;
  const log = [];
  // The endpoint's root: a token classifier answers the Inference API's token-classification
  // task there, aggregation_strategy "simple" by default, as the Inference API serves it.
  const hf = new InferenceClient(apiKey, { fetch: recordingFetch(log) }).endpoint(nerUrl);
  for (const t of expected) {
    assertEntities(await hf.tokenClassification({ inputs: t.text }), t.expected.simple, `tokenClassification "${t.text}"`);
  }
  assert.equal(log[0].url, nerUrl);
  assert.deepEqual(log[0].body, { inputs: expected[0].text });
  // The other strategies and ignore_labels, at /token-classification.
  const at = new HfInference(apiKey);
  for (const [name, parameters] of [['first', { aggregation_strategy: 'first' }], ['average', { aggregation_strategy: 'average' }],
    ['max', { aggregation_strategy: 'max' }], ['simple_ignore_nothing', { aggregation_strategy: 'simple', ignore_labels: [] }]]) {
    for (const t of expected) {
      const got = await at.tokenClassification({ endpointUrl: `${nerUrl}/token-classification`, inputs: t.text, parameters });
      assertEntities(got, t.expected[name], `tokenClassification ${name} "${t.text}"`);
    }
  }
  ok(`@huggingface/inference ${versionOf('@huggingface/inference')}: tokenClassification at the root (simple) and at /token-classification (first, average, max, ignore_labels []) equals transformers' TokenClassificationPipeline on every reference text`);

  // gRPC ClassifyTokens gives the same, aggregation none included.
  const nerEncoder = new relserveProto.Encoder(config.ner_grpc, grpc.credentials.createInsecure(), { 'grpc.enable_http_proxy': 0 });
  const g = await call('ClassifyTokens', { texts: expected.map((t) => t.text), aggregation_strategy: 'none' }, apiKey, nerEncoder);
  nerEncoder.close();
  g.results.forEach((r, i) => {
    assertEntities(r.entities.map((e) => ({ entity: e.entity, score: e.score, index: e.index, word: e.word,
      start: Number(e.start), end: Number(e.end) })), expected[i].expected.none, `gRPC ClassifyTokens none ${i}`);
  });
  ok('gRPC ClassifyTokens (aggregation_strategy none, every text in one call) equals the pipeline');

  // A model without a token-classification head: 424, as TEI answers a missing head.
  await assert.rejects(new HfInference(apiKey).tokenClassification({ endpointUrl: `${url}/token-classification`, inputs: 'Marie Curie' }),
    (e) => e.name === 'ProviderApiError' && e.httpResponse.status === 424 && /token-classification head/.test(e.message));
  ok('@huggingface/inference: tokenClassification on a model without the head is a ProviderApiError (424)');
}

// --- cohere-ai ---------------------------------------------------------------------------------

function int8Of(v) {
  const m = Math.max(...v.map(Math.abs));
  return v.map((x) => (x * 127) / m);
}
function packBits(v) {
  const out = new Array(Math.ceil(v.length / 8)).fill(0);
  v.forEach((x, i) => { if (x > 0) out[i >> 3] |= 0x80 >> (i & 7); });
  return out;
}

async function cohereTests(want, want8, rerank) {
  const scoreOf = Object.fromEntries(rerank.results.map((r) => [r.index, r.score]));
  const order = rerank.results.map((r) => r.index);

  // v1 client: CohereClient with `environment` set to the server.
  const log = [];
  const v1 = new CohereClient({ token: apiKey, environment: url, fetch: recordingFetch(log) });
  const e1 = await v1.embed({ model: 'ref', texts, inputType: 'search_document' }, { maxRetries: 0 });
  assert.equal(e1.responseType, 'embeddings_floats');
  e1.embeddings.forEach((v, i) => assertClose(v, want[i], SAME, `cohere v1 embed ${i}`));
  assert.equal(new URL(log[0].url).pathname, '/v1/embed');
  assert.equal(log[0].authorization, `Bearer ${apiKey}`);
  const e1t = await v1.embed({ model: 'ref', texts, inputType: 'search_query', embeddingTypes: ['float', 'int8'] }, { maxRetries: 0 });
  assert.equal(e1t.responseType, 'embeddings_by_type');
  e1t.embeddings.float.forEach((v, i) => assertClose(v, want[i], SAME, `cohere v1 float ${i}`));
  e1t.embeddings.int8.forEach((v, i) => assertClose(v, int8Of(want[i]), 0.5 + 1e-3, `cohere v1 int8 ${i}`));
  ok(`cohere-ai ${versionOf('cohere-ai')} CohereClient (v1) embed: floats and by type (float, int8) equal gRPC Embed`);

  const r1 = await v1.rerank({ model: 'reranker', query, documents, topN: 2, returnDocuments: true }, { maxRetries: 0 });
  assert.deepEqual(r1.results.map((r) => r.index), order.slice(0, 2));
  r1.results.forEach((r) => {
    assertClose([r.relevanceScore], [scoreOf[r.index]], SAME, `cohere v1 rerank ${r.index}`);
    assert.equal(r.document.text, documents[r.index]);
  });
  assert.equal(new URL(log[2].url).pathname, '/v1/rerank');
  ok('cohere-ai CohereClient (v1) rerank: top 2 with documents, scores equal gRPC Rerank');

  // v2 client: CohereClientV2 with `baseUrl` set to the server.
  const log2 = [];
  const v2 = new CohereClientV2({ token: apiKey, baseUrl: url, fetch: recordingFetch(log2) });
  const e2 = await v2.embed({ model: 'ref', texts, inputType: 'classification', embeddingTypes: ['float', 'int8', 'ubinary'] }, { maxRetries: 0 });
  assert.equal(e2.responseType, 'embeddings_by_type');
  assert.deepEqual(e2.texts, texts);
  e2.embeddings.float.forEach((v, i) => assertClose(v, want[i], SAME, `cohere v2 float ${i}`));
  e2.embeddings.int8.forEach((v, i) => assertClose(v, int8Of(want[i]), 0.5 + 1e-3, `cohere v2 int8 ${i}`));
  e2.embeddings.ubinary.forEach((v, i) => assert.deepEqual(v, packBits(want[i]), `cohere v2 ubinary ${i}`));
  assert.equal(new URL(log2[0].url).pathname, '/v2/embed');
  const e2d = await v2.embed({ model: 'ref', texts, inputType: 'search_document', embeddingTypes: ['float'], outputDimension: 8 }, { maxRetries: 0 });
  e2d.embeddings.float.forEach((v, i) => assertClose(v, want8[i], SAME, `cohere v2 outputDimension ${i}`));
  ok('cohere-ai CohereClientV2 embed: float, int8, ubinary and outputDimension 8 equal gRPC Embed');

  const r2 = await v2.rerank({ model: 'reranker', query, documents }, { maxRetries: 0 });
  assert.deepEqual(r2.results.map((r) => r.index), order);
  r2.results.forEach((r) => assertClose([r.relevanceScore], [scoreOf[r.index]], SAME, `cohere v2 rerank ${r.index}`));
  assert.equal(new URL(log2[2].url).pathname, '/v2/rerank');
  ok('cohere-ai CohereClientV2 rerank: every document, best first, scores equal gRPC Rerank');

  // A ColBERT model (tests/data/colbert's PyLate checkpoint): ordinary rerank answers to both
  // clients, MaxSim scores of the reference, best first.
  const colbert = JSON.parse(readFileSync(`${config.colbert}/colbert_expected.json`, 'utf8'));
  const cb = colbert.models.cb_pylate;
  for (const [q, query] of colbert.queries.entries()) {
    const c2 = await v2.rerank({ model: 'colbert', query, documents: colbert.documents }, { maxRetries: 0 });
    assert.deepEqual(c2.results.map((r) => r.index), cb.ranking[q]);
    c2.results.forEach((r) => assertClose([r.relevanceScore], [cb.scores[q][r.index]], REFERENCE, `colbert v2 ${q} ${r.index}`));
    const c1 = await v1.rerank({ model: 'colbert', query, documents: colbert.documents, topN: 2 }, { maxRetries: 0 });
    assert.deepEqual(c1.results.map((r) => r.index), cb.ranking[q].slice(0, 2));
  }
  ok('cohere-ai v1 and v2 rerank on a ColBERT model: MaxSim scores of the reference, best first');

  await assert.rejects(v2.embed({ model: 'no-such-model', texts, inputType: 'search_query' }, { maxRetries: 0 }),
    (e) => e instanceof CohereError && e.statusCode === 404);
  ok('cohere-ai: an unknown model is a CohereError with status 404');
}

async function main() {
  const started = Date.now();
  const rerank = await grpcTests();
  const want = await grpcEmbed(texts);
  const want8 = await grpcEmbed(texts, { dimensions: 8 });
  const wantRaw = await grpcEmbed(texts, { normalize: false });
  const cls = await call('Classify', { model: 'cls', inputs: [{ text: texts[0] }] });
  const wantClass = cls.results[0].labels.map((l) => ({ label: l.label, score: l.score }));

  await openaiTests(want, want8);
  await langchainTests(want, want8);
  await huggingfaceTests(want, wantRaw, wantClass);
  await zeroShotTests();
  await tokenClassificationTests();
  await cohereTests(want, want8, rerank);
  encoder.close();
  console.log(`largest difference from gRPC Embed/Rerank/Classify: ${worst.get(SAME)} (bound ${SAME}); ` +
    `from transformers 4.40.2's reference: ${worst.get(REFERENCE)} (bound ${REFERENCE})`);
  console.log(`OK: ${checks} checks in ${((Date.now() - started) / 1000).toFixed(1)} s (node ${process.version}; ` +
    `openai ${versionOf('openai')}, @langchain/openai ${versionOf('@langchain/openai')}, @huggingface/inference ${versionOf('@huggingface/inference')}, ` +
    `cohere-ai ${versionOf('cohere-ai')}, @grpc/grpc-js ${versionOf('@grpc/grpc-js')}, @grpc/proto-loader ${versionOf('@grpc/proto-loader')})`);
}

main().catch((e) => {
  console.error('FAILED:', e && e.stack ? e.stack : e);
  process.exit(1);
});
