#!/usr/bin/env python3
"""Regenerate the fixtures of tests/data/tokenizer_json/.

Every <fixture>/tokenizer.json is written directly as the JSON document that
Hugging Face transformers 4.40.2 with tokenizers 0.19.1 saves for the fixture's
construction (see README.md for what each file holds and where that behaviour
is documented). t5/spiece.model is trained here and t5/cases.json lists what it
gives for a set of strings; xlm_roberta/sentencepiece.bpe.model is a copy of
the XLNet reference model.

Usage:  python3 make_fixtures.py [REPO_ROOT] [--verbose]

REPO_ROOT defaults to this file's ../../.. . Needs Debian's python3-sentencepiece
(sentencepiece 0.1.97 with sentencepiece_model_pb2). Every output is re-read
and checked after it is written; two runs give byte-identical files.
"""

import argparse
import base64
import collections
import contextlib
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile

import sentencepiece
from sentencepiece import sentencepiece_model_pb2

REFERENCE = "tests/data/reference"
FIXTURES_DIR = "tests/data/tokenizer_json"
WORD_START = "\u2581"  # the sentencepiece word-start mark

# One row per fixture directory. `family` picks the document layout below;
# `source` is relative to the repository root; the switches are the
# constructor options the fixture stands for.
Fixture = collections.namedtuple(
    "Fixture", "name family source lower punct keep_accents extra_ids",
    defaults=(False, False, False, 0))

FIXTURES = [
    Fixture("deberta", "deberta", REFERENCE + "/tokenizer/spm.model"),
    Fixture("deberta_lower", "deberta", REFERENCE + "/tokenizer/spm.model", lower=True),
    Fixture("deberta_punct", "deberta", REFERENCE + "/tokenizer/spm.model", punct=True),
    Fixture("xlnet", "xlnet", REFERENCE + "/tokenizer_xlnet/spiece.model"),
    Fixture("xlnet_lower_keep_accents", "xlnet", REFERENCE + "/tokenizer_xlnet/spiece.model",
            lower=True, keep_accents=True),
    Fixture("t5", "t5", FIXTURES_DIR + "/t5/spiece.model", extra_ids=100),
    Fixture("xlm_roberta", "xlm_roberta", FIXTURES_DIR + "/xlm_roberta/sentencepiece.bpe.model"),
    Fixture("bert_uncased", "bert", REFERENCE + "/tokenizer_wordpiece/vocab_uncased.txt", lower=True),
    Fixture("bert_cased", "bert", REFERENCE + "/tokenizer_wordpiece/vocab_cased.txt"),
    Fixture("mpnet", "mpnet", REFERENCE + "/tokenizer_wordpiece/vocab_mpnet.txt", lower=True),
]


# ---------------------------------------------------------------------------
# JSON text in the files' byte format: two-space indentation, one member or
# element per line, ": " after keys, empty containers as {} / [], non-ASCII
# written as UTF-8, no newline at the end.
# ---------------------------------------------------------------------------

def float_text(x):
    """The shortest digits that read back as `x`, as plain decimals for
    1e-5 <= |x| < 1e16 and as `1e16` / `1.5e-7` otherwise. Python's repr has
    the same digits and differs only in where it switches to exponent form and
    in how it writes the exponent (`1e-05`, `1e+16`)."""
    if not math.isfinite(x):
        raise ValueError("no JSON form for %r" % x)
    text = repr(x)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "")
    point = int(exponent) + 1  # value = 0.<digits> * 10**point
    if -5 < point <= 0:
        return sign + "0." + "0" * -point + digits
    # repr uses exponent form only for point <= -4 or point > 16
    return sign + digits[0] + ("." + digits[1:] if len(digits) > 1 else "") + "e%d" % (point - 1)


def json_text(value, depth=0):
    if isinstance(value, float):
        return float_text(value)
    if isinstance(value, dict):
        lines = [json.dumps(k, ensure_ascii=False) + ": " + json_text(v, depth + 1)
                 for k, v in value.items()]
        brackets = "{}"
    elif isinstance(value, list):
        lines = [json_text(v, depth + 1) for v in value]
        brackets = "[]"
    else:  # str, int, bool, None; json.dumps escapes strings the same way
        return json.dumps(value, ensure_ascii=False)
    if not lines:
        return brackets
    inner = "  " * (depth + 1)
    return (brackets[0] + "\n" + inner + (",\n" + inner).join(lines) + "\n"
            + "  " * depth + brackets[1])


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------

def read_model(path):
    proto = sentencepiece_model_pb2.ModelProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    spec = proto.trainer_spec
    if spec.model_type != spec.UNIGRAM or spec.byte_fallback:
        raise ValueError("%s: only unigram models without byte fallback are expected" % path)
    if not proto.normalizer_spec.precompiled_charsmap:
        raise ValueError("%s: the model has no precompiled_charsmap" % path)
    return proto


def read_vocab_lines(path):
    """One token per line; the token's id is its 0-based line number."""
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    if "\r" in text or not text.endswith("\n"):
        raise ValueError("%s: expected LF-terminated lines" % path)
    lines = text[:-1].split("\n")
    if len(set(lines)) != len(lines):
        raise ValueError("%s: a token is listed twice" % path)
    return lines


# ---------------------------------------------------------------------------
# Document parts. Every pipeline step is {"type": ..., fields...} with the
# fields in the order the files list them.
# ---------------------------------------------------------------------------

def step(kind, **fields):
    return dict(type=kind, **fields)


METASPACE = step("Metaspace", replacement=WORD_START, prepend_scheme="always", split=True)
STRIP_BOTH = step("Strip", strip_left=True, strip_right=True)
STRIP_RIGHT = step("Strip", strip_left=False, strip_right=True)
WORDPIECE_DECODER = step("WordPiece", prefix="##", cleanup=True)


def squeeze_spaces(into):
    """Runs of two or more spaces become one `into`."""
    return step("Replace", pattern={"Regex": " {2,}"}, content=into)


def charsmap(proto):
    """The model's own normalization table, carried over as base64."""
    data = proto.normalizer_spec.precompiled_charsmap
    return step("Precompiled", precompiled_charsmap=base64.b64encode(data).decode("ascii"))


def chain(steps):
    return step("Sequence", normalizers=steps)


def scored(proto, adjust=lambda piece, score: score):
    return [[p.piece, adjust(p.piece, float(p.score))] for p in proto.pieces]


def unigram(vocab, unk_id):
    return step("Unigram", unk_id=unk_id, vocab=vocab, byte_fallback=False)


def lowered_by_xlnet(piece):
    """XLNet's fast tokenizer lowers the score of every piece that ends in a
    digit followed by a comma by 100, so that such pieces are rarely chosen."""
    return len(piece) >= 2 and piece[-1] == "," and piece[-2].isdigit()


# Each family turns a fixture row and its source file into the parts of the
# document: normalizer, pre_tokenizer, decoder, model, the post-processing
# templates (`$A`/`$B` are the sequences, anything else a special token; the
# number after ":" is the type id) and the special tokens. The special tokens
# are listed in the order transformers registers them (bos, eos, unk, sep,
# pad, cls, mask, then the additional ones; each text once), optionally with
# the one flag the family sets on it.

def deberta(fx, path):
    proto = read_model(path)
    return dict(
        normalizer=chain(([step("Lowercase")] if fx.lower else [])
                         + [STRIP_BOTH, charsmap(proto), squeeze_spaces(" ")]),
        pre_tokenizer=step("Sequence", pretokenizers=(
            [step("Punctuation", behavior="Isolated")] if fx.punct else []) + [METASPACE]),
        decoder=METASPACE,
        model=unigram(scored(proto), proto.trainer_spec.unk_id),
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        # DeBERTa-v2 creates its unknown token with normalization switched on
        specials=["[CLS]", "[SEP]", ("[UNK]", "normalized"), "[PAD]", "[MASK]"],
    )


def xlnet(fx, path):
    proto = read_model(path)
    quotes = [step("Replace", pattern={"String": q}, content='"') for q in ("``", "''")]
    accents = [] if fx.keep_accents else [step("NFKD"), step("StripAccents")]
    return dict(
        normalizer=chain(quotes + accents + ([step("Lowercase")] if fx.lower else [])
                         + [charsmap(proto), squeeze_spaces(" ")]),
        pre_tokenizer=METASPACE,
        decoder=METASPACE,
        model=unigram(scored(proto, lambda p, s: s - 100 if lowered_by_xlnet(p) else s),
                      proto.trainer_spec.unk_id),
        # XLNet puts its specials at the end; <cls> has type id 2
        single="$A:0 <sep>:0 <cls>:2",
        pair="$A:0 <sep>:0 $B:1 <sep>:1 <cls>:2",
        specials=["<s>", "</s>", "<unk>", "<sep>", "<pad>", "<cls>", ("<mask>", "lstrip"),
                  "<eop>", "<eod>"],
    )


def plain_sentencepiece_normalizer(proto):
    """T5 and XLM-R have no normalizer of their own: the model's table, then
    trailing whitespace removed and runs of spaces turned into one word-start
    mark."""
    return chain([charsmap(proto), STRIP_RIGHT, squeeze_spaces(WORD_START)])


def t5(fx, path):
    proto = read_model(path)
    # The extra ids follow the model's pieces, highest number first.
    extra = [["<extra_id_%d>" % k, 0.0] for k in reversed(range(fx.extra_ids))]
    return dict(
        normalizer=plain_sentencepiece_normalizer(proto),
        pre_tokenizer=METASPACE,
        decoder=METASPACE,
        model=unigram(scored(proto) + extra, proto.trainer_spec.unk_id),
        single="$A:0 </s>:0",
        pair="$A:0 </s>:0 $B:0 </s>:0",
        specials=["</s>", "<unk>", "<pad>"] + ["<extra_id_%d>" % k for k in range(fx.extra_ids)],
    )


def xlm_roberta(fx, path):
    proto = read_model(path)
    # fairseq layout: four fixed entries, the model's pieces from its id 3 on
    # shifted up by one (its own <unk> <s> </s> are left out), <mask> last.
    fixed = [[token, 0.0] for token in ("<s>", "<pad>", "</s>", "<unk>")]
    return dict(
        normalizer=plain_sentencepiece_normalizer(proto),
        pre_tokenizer=METASPACE,
        decoder=METASPACE,
        model=unigram(fixed + scored(proto)[3:] + [["<mask>", 0.0]], 3),
        single="<s>:0 $A:0 </s>:0",
        pair="<s>:0 $A:0 </s>:0 </s>:0 $B:0 </s>:0",
        specials=["<s>", "</s>", "<unk>", "<pad>", ("<mask>", "lstrip")],
    )


def wordpiece_parts(fx, path, single, pair, specials):
    lines = read_vocab_lines(path)
    return dict(
        normalizer=step("BertNormalizer", clean_text=True, handle_chinese_chars=True,
                        strip_accents=None, lowercase=fx.lower),
        pre_tokenizer=step("BertPreTokenizer"),
        decoder=WORDPIECE_DECODER,
        model=step("WordPiece", unk_token="[UNK]", continuing_subword_prefix="##",
                   max_input_chars_per_word=100, vocab={t: i for i, t in enumerate(lines)}),
        single=single, pair=pair, specials=specials,
    )


def bert(fx, path):
    return wordpiece_parts(fx, path, "[CLS]:0 $A:0 [SEP]:0", "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
                           ["[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"])


def mpnet(fx, path):
    # MPNet separates a pair with two </s>; its <unk> (id 3) is not special,
    # its unknown token is [UNK].
    return wordpiece_parts(fx, path, "<s>:0 $A:0 </s>:0", "<s>:0 $A:0 </s>:0 </s>:0 $B:1 </s>:1",
                           ["<s>", "</s>", "[UNK]", "<pad>", ("<mask>", "lstrip")])


FAMILIES = {f.__name__: f for f in (deberta, xlnet, t5, xlm_roberta, bert, mpnet)}


def vocab_ids(model):
    """Token -> id as the model resolves it; a Unigram piece that is listed
    twice resolves to its later id."""
    if model["type"] == "WordPiece":
        return dict(model["vocab"])
    return {piece: i for i, (piece, _) in enumerate(model["vocab"])}


def register_specials(specials, known, vocab_size):
    """A special token keeps the id the model has for it; one the model lacks
    gets the first id after both the vocabulary and the tokens placed so far.
    All are special and unnormalized unless the family says otherwise."""
    placed = {}
    for entry in specials:
        text, flag = (entry, None) if isinstance(entry, str) else entry
        token_id = known.get(text)
        if token_id is None:
            token_id = max([vocab_size] + [t["id"] + 1 for t in placed.values()])
        placed[text] = {"id": token_id, "content": text, "single_word": False,
                        "lstrip": flag == "lstrip", "rstrip": False,
                        "normalized": flag == "normalized", "special": True}
    return sorted(placed.values(), key=lambda t: t["id"])


def templates(single, pair, ids):
    def items(template):
        out = []
        for item in template.split():
            name, type_id = item.split(":")
            kind = "Sequence" if name.startswith("$") else "SpecialToken"
            out.append({kind: {"id": name.lstrip("$"), "type_id": int(type_id)}})
        return out

    names = {n.split(":")[0] for n in (single + " " + pair).split() if not n.startswith("$")}
    return step("TemplateProcessing", single=items(single), pair=items(pair), special_tokens={
        n: {"id": n, "ids": [ids[n]], "tokens": [n]}
        for n in sorted(names, key=lambda n: n.encode("utf-8"))})


def build_document(fx, root):
    parts = FAMILIES[fx.family](fx, os.path.join(root, fx.source))
    model = parts["model"]
    added = register_specials(parts["specials"], vocab_ids(model), len(model["vocab"]))
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": parts["normalizer"],
        "pre_tokenizer": parts["pre_tokenizer"],
        "post_processor": templates(parts["single"], parts["pair"],
                                    {t["content"]: t["id"] for t in added}),
        "decoder": parts["decoder"],
        "model": model,
    }


# ---------------------------------------------------------------------------
# Checks of a written tokenizer.json against its source file
# ---------------------------------------------------------------------------

TOP_KEYS = ["version", "truncation", "padding", "added_tokens", "normalizer",
            "pre_tokenizer", "post_processor", "decoder", "model"]


def expected_ids_sentencepiece(fx, path, doc):
    """Checks the Unigram vocabulary against the .model file and returns the
    id each token should have (None: not in the vocabulary)."""
    proto = read_model(path)
    sp = sentencepiece.SentencePieceProcessor(model_file=path)
    model, n = doc["model"], len(proto.pieces)
    vocab = model["vocab"]
    assert model["type"] == "Unigram" and model["byte_fallback"] is False
    maps = [s["precompiled_charsmap"] for s in doc["normalizer"]["normalizers"]
            if s["type"] == "Precompiled"]
    assert [base64.b64decode(m) for m in maps] == [proto.normalizer_spec.precompiled_charsmap]

    if fx.family == "xlm_roberta":
        assert [p.piece for p in proto.pieces[:3]] == ["<unk>", "<s>", "</s>"]
        assert len(vocab) == n + 2 and model["unk_id"] == 3
        assert vocab[:4] == [["<s>", 0.0], ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0]]
        assert vocab[n + 1] == ["<mask>", 0.0]
        for i in range(3, n):
            assert vocab[i + 1] == [proto.pieces[i].piece, float(proto.pieces[i].score)], i
        # the slow XLM-R tokenizer's view: fixed ids, sentencepiece id + 1,
        # <mask> after all pieces; a repeated token keeps its later id
        fixed = {0: "<s>", 1: "<pad>", 2: "</s>", 3: "<unk>", n + 1: "<mask>"}
        view = {fixed[i] if i in fixed else sp.id_to_piece(i - 1): i for i in range(n + 2)}
        return view.get

    assert model["unk_id"] == proto.trainer_spec.unk_id
    for i, p in enumerate(proto.pieces):
        piece, score = vocab[i]
        lowered = fx.family == "xlnet" and lowered_by_xlnet(p.piece)
        assert piece == p.piece and score == float(p.score) - (100 if lowered else 0), i
    assert vocab[n:] == [["<extra_id_%d>" % k, 0.0] for k in range(fx.extra_ids - 1, -1, -1)]
    unk_piece = sp.id_to_piece(sp.unk_id())

    def lookup(token):
        if token.startswith("<extra_id_") and token.endswith(">"):
            return n + fx.extra_ids - 1 - int(token[len("<extra_id_"):-1])
        i = sp.piece_to_id(token)
        return i if i != sp.unk_id() or token == unk_piece else None
    return lookup


def check_fixture(fx, root, path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    assert list(doc) == TOP_KEYS
    source = os.path.join(root, fx.source)
    if doc["model"]["type"] == "WordPiece":
        lines = read_vocab_lines(source)
        assert list(doc["model"]["vocab"].items()) == [(t, i) for i, t in enumerate(lines)]
        expected = {t: i for i, t in enumerate(lines)}.get
    else:
        expected = expected_ids_sentencepiece(fx, source, doc)
    size = len(doc["model"]["vocab"])
    ids = [t["id"] for t in doc["added_tokens"]]
    assert ids == sorted(set(ids))
    for t in doc["added_tokens"]:
        want = expected(t["content"])
        if want is None:  # not in the vocabulary: placed after it
            assert t["id"] >= size, t
        else:
            assert t["id"] == want, t
    for name, entry in doc["post_processor"]["special_tokens"].items():
        assert entry == {"id": name, "ids": [expected(name)], "tokens": [name]}, name
    return doc


# ---------------------------------------------------------------------------
# t5/spiece.model, t5/cases.json, xlm_roberta/sentencepiece.bpe.model
# ---------------------------------------------------------------------------

T5_TRAINING = [
    "--input=corpus.txt",
    "--model_prefix=spiece",
    "--vocab_size=1000",
    "--model_type=unigram",
    "--pad_id=0",
    "--pad_piece=<pad>",
    "--eos_id=1",
    "--eos_piece=</s>",
    "--unk_id=2",
    "--unk_piece=<unk>",
    "--bos_id=-1",
    "--num_threads=1",
]

T5_CASE_TEXTS = [
    "Hello world",
    "",
    "   ",
    "  leading and trailing spaces   ",
    "multiple    internal\tspaces\nand\r\nnew lines",
    "tabs\tbetween\twords and a trailing newline\n",
    "The GNU General Public License is a free, copyleft license for software and other kinds of works.",
    "translate English to German: That is good.",
    "Numbers: 0 12 345 6789 3.14159 1,000,000 2024-05-06 #42",
    "1,234,567.89 and 9,999 copies",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 fa\u00e7ade \u00c5ngstr\u00f6m co\u00f6perate",
    "decomposed cafe\u0301 vs precomposed caf\u00e9",
    "\uff26\uff35\uff2c\uff2c\uff37\uff29\uff24\uff34\uff28 \uff54\uff45\uff58\uff54 \uff21\uff22\uff23 \uff11\uff12\uff13",
    "\ufb01nance \ufb02ow \u2460 \u338f \u2122 \u00bd x\u00b2",
    "Emoji: \U0001F600\U0001F680\U0001F44D\U0001F3FD \u2764\ufe0f end",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 and \u4e2d\u6587\u5b57\u7b26",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u0438 \u0440\u0443\u0441\u0441\u043a\u0438\u0439 \u0442\u0435\u043a\u0441\u0442",
    "The end.</s>",
    "summarize: <extra_id_3> fills the gap",
    "<extra_id_0><extra_id_99> </s><pad><unk>",
    "Punctuation!!! ??? ... --- (brackets) [square] {curly} \"quotes\" 'single' a/b\\c",
    "URL https://www.gnu.org/licenses/gpl-3.0.html and e-mail someone@example.com",
    "MiXeD CaSe WORDS and UPPERCASE LICENSE",
    "non\u00a0breaking\u2003em\u2009thin\u200bzero-width a",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
]

CASES_NOTE = (
    "Produced by make_fixtures.py. ids = SentencePieceProcessor.encode(text, out_type=int), "
    "pieces = encode(text, out_type=str), no special tokens added (no </s>); special tokens "
    "written in the text are not recognised by sentencepiece and are split like any text. "
    "The T5 tokenizer.json applies its added tokens (</s>, <pad>, <unk>, <extra_id_N>) "
    "before the model, so its ids differ from these where such tokens occur in the text.")


def reference_corpus(root):
    """The training text of the reference cases: the files listed in
    tokenizer/cases.json joined with newlines, checked by size and sha256."""
    with open(os.path.join(root, REFERENCE, "tokenizer", "cases.json"), encoding="utf-8") as f:
        corpus = json.load(f)["corpus"]
    if corpus.get("joined_with") != "\\n":
        raise ValueError("unexpected corpus layout")
    chunks = []
    for name in corpus["files"]:
        with open(name, "rb") as f:
            chunks.append(f.read())
    data = b"\n".join(chunks)
    digest = hashlib.sha256(data).hexdigest()
    if (len(data), digest) != (corpus["bytes"], corpus["sha256"]):
        raise ValueError("corpus differs from the reference (%d bytes, sha256 %s)" % (len(data), digest))
    return corpus, data


@contextlib.contextmanager
def stderr_silenced(silence):
    """The trainer logs straight to file descriptor 2."""
    if not silence:
        yield
        return
    sys.stderr.flush()
    kept = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(kept, 2)
        os.close(kept)
        os.close(null)


def train_t5(corpus_bytes, target, verbose):
    # Trained inside a scratch directory under the relative names the model
    # records in its trainer_spec.
    with tempfile.TemporaryDirectory() as scratch:
        with open(os.path.join(scratch, "corpus.txt"), "wb") as f:
            f.write(corpus_bytes)
        previous = os.getcwd()
        os.chdir(scratch)
        try:
            with stderr_silenced(not verbose):
                sentencepiece.SentencePieceTrainer.train(" ".join(T5_TRAINING))
            with open("spiece.model", "rb") as f:
                model_bytes = f.read()
        finally:
            os.chdir(previous)
    with open(target, "wb") as f:
        f.write(model_bytes)
    return model_bytes


def write_t5_cases(model_path, model_bytes, corpus, target):
    sp = sentencepiece.SentencePieceProcessor(model_file=model_path)
    doc = {
        "model": "spiece.model",
        "spm_train_args": T5_TRAINING,
        "corpus": {key: corpus[key] for key in ("files", "bytes", "sha256", "joined_with")},
        "spm_model_sha256": hashlib.sha256(model_bytes).hexdigest(),
        "sentencepiece_version": sentencepiece.__version__,
        "special_ids": {"pad": 0, "eos": 1, "unk": 2},
        "vocab_size": sp.get_piece_size(),
        "extra_ids": "T5Tokenizer default extra_ids=100: <extra_id_99> = 1000 ... "
                     "<extra_id_0> = 1099 (not in spiece.model)",
        "note": CASES_NOTE,
        "cases": [{"text": text, "ids": sp.encode(text, out_type=int),
                   "pieces": sp.encode(text, out_type=str)} for text in T5_CASE_TEXTS],
    }
    doc["corpus"]["same_as"] = "tests/data/reference/tokenizer/cases.json corpus"
    with open(target, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")


def copy_xlm_roberta_model(root, target):
    """The XLNet reference model stands in for XLM-R's: it starts with the
    same three pieces."""
    source = os.path.join(root, REFERENCE, "tokenizer_xlnet", "spiece.model")
    if [p.piece for p in read_model(source).pieces[:3]] != ["<unk>", "<s>", "</s>"]:
        raise ValueError("%s does not start with <unk>, <s>, </s>" % source)
    shutil.copyfile(source, target)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo_root", nargs="?", default=os.path.join(here, "..", "..", ".."),
                        help="repository root (default: this script's ../../..)")
    parser.add_argument("--verbose", action="store_true", help="show the sentencepiece trainer log")
    args = parser.parse_args()
    root = os.path.normpath(args.repo_root)
    out = os.path.join(root, FIXTURES_DIR)
    for fx in FIXTURES:
        os.makedirs(os.path.join(out, fx.name), exist_ok=True)

    corpus, corpus_bytes = reference_corpus(root)
    t5_model = os.path.join(out, "t5", "spiece.model")
    model_bytes = train_t5(corpus_bytes, t5_model, args.verbose)
    write_t5_cases(t5_model, model_bytes, corpus, os.path.join(out, "t5", "cases.json"))
    copy_xlm_roberta_model(root, os.path.join(out, "xlm_roberta", "sentencepiece.bpe.model"))

    for fx in FIXTURES:
        path = os.path.join(out, fx.name, "tokenizer.json")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(json_text(build_document(fx, root)))
        try:
            doc = check_fixture(fx, root, path)
        except AssertionError as err:
            raise AssertionError("%s does not pass its checks: %s" % (path, err)) from err
        print("%-40s %8d bytes  %d added tokens"
              % (fx.name + "/tokenizer.json", os.path.getsize(path), len(doc["added_tokens"])))
    for name in ("t5/spiece.model", "t5/cases.json", "xlm_roberta/sentencepiece.bpe.model"):
        print("%-40s %8d bytes" % (name, os.path.getsize(os.path.join(out, name))))


if __name__ == "__main__":
    main()
