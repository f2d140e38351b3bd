#!/usr/bin/env python3
"""Write the tokenizer.json fixtures of tests/data/tokenizer_json/.

Each fixture is the `tokenizer.json` that Hugging Face transformers 4.40.2
(commit 4fdf58afb72b0754da30037fc800b6044e7d9c99) with tokenizers 0.19.1 writes
when a fast tokenizer class is loaded from a directory that holds only the slow
tokenizer's vocabulary file (`<Fast>.from_pretrained(dir)`, which builds the slow
tokenizer, converts it with `transformers.convert_slow_tokenizer` and registers
the special tokens) and `save_pretrained` is called.

Neither transformers nor tokenizers is needed: this script ports
  * the converters of transformers/src/transformers/convert_slow_tokenizer.py
    (SpmConverter, DebertaV2Converter, XLMRobertaConverter, XLNetConverter,
    T5Converter, BertConverter, MPNetConverter, check_number_comma,
    _get_prepend_scheme),
  * how PreTrainedTokenizerFast.__init__ (tokenization_utils_fast.py) and the
    slow/fast tokenizer classes register their special tokens,
  * the serde JSON layout of tokenizers 0.19.1 (`Tokenizer.save(path,
    pretty=True)`, i.e. serde_json::to_string_pretty, no trailing newline).
See README.md for the exact sources.

Usage:  python3 make_fixtures.py [REPO_ROOT]
REPO_ROOT defaults to this file's ../../.. . Needs Debian's python3-sentencepiece
(sentencepiece 0.1.97 with sentencepiece_model_pb2). Inputs are read from
REPO_ROOT/tests/data/reference/, outputs are written to
REPO_ROOT/tests/data/tokenizer_json/<fixture>/. Running it twice gives
byte-identical files.
"""

import argparse
import base64
import collections
import contextlib
import copy
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as model_pb2

REFERENCE = os.path.join("tests", "data", "reference")
OUTPUT = os.path.join("tests", "data", "tokenizer_json")


# ---------------------------------------------------------------------------
# serde_json::to_string_pretty emulation (serde_json 1.x PrettyFormatter, ryu
# float formatting). Dicts are written in insertion order, which the builders
# below set to the Rust struct field order.
# ---------------------------------------------------------------------------


def _ryu_f64(value):
    """Format a finite f64 like the ryu crate's `format_finite` (serde_json)."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError("serde_json writes non-finite floats as null; not expected here")
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    text = repr(value)  # shortest round-trip digits, like ryu's d2d
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    if "e" in text:
        mant, exp = text.split("e")
        exp = int(exp)
    else:
        mant, exp = text, 0
    if "." in mant:
        int_part, frac_part = mant.split(".")
    else:
        int_part, frac_part = mant, ""
    digits = (int_part + frac_part).lstrip("0")
    k = exp - len(frac_part)  # value = int(digits) * 10**k
    stripped = digits.rstrip("0")
    k += len(digits) - len(stripped)
    digits = stripped
    length = len(digits)
    kk = length + k  # 10**(kk-1) <= value < 10**kk
    if 0 <= k and kk <= 16:
        out = digits + "0" * k + ".0"
    elif 0 < kk <= 16:
        out = digits[:kk] + "." + digits[kk:]
    elif -5 < kk <= 0:
        out = "0." + "0" * (-kk) + digits
    elif length == 1:
        out = digits + "e" + str(kk - 1)
    else:
        out = digits[0] + "." + digits[1:] + "e" + str(kk - 1)
    return sign + out


def _serde_str(s):
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20:
            short = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}
            out.append(short.get(o, "\\u%04x" % o))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def serde_pretty(value, level=0):
    indent = "  "
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _ryu_f64(value)
    if isinstance(value, str):
        return _serde_str(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = indent * (level + 1)
        items = [inner + _serde_str(k) + ": " + serde_pretty(v, level + 1) for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent * level + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        inner = indent * (level + 1)
        items = [inner + serde_pretty(v, level + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + indent * level + "]"
    raise TypeError("cannot serialize %r" % (value,))


# ---------------------------------------------------------------------------
# tokenizers 0.19.1 components, as the Python bindings build them and as serde
# writes them (tokenizers/src/normalizers, pre_tokenizers, processors,
# decoders, models, tokenizer/added_vocabulary.rs, tokenizer/serialization.rs).
# ---------------------------------------------------------------------------


class Regex:
    """tokenizers.Regex: a pattern given to Replace as a regular expression."""

    def __init__(self, pattern):
        self.pattern = pattern


class normalizers:
    @staticmethod
    def Sequence(items):
        return {"type": "Sequence", "normalizers": list(items)}

    @staticmethod
    def Lowercase():
        return {"type": "Lowercase"}

    @staticmethod
    def Strip(left=True, right=True):
        return {"type": "Strip", "strip_left": left, "strip_right": right}

    @staticmethod
    def Precompiled(precompiled_charsmap):
        # spm_precompiled: serialize_with = as_base64 (standard alphabet, padded)
        return {
            "type": "Precompiled",
            "precompiled_charsmap": base64.b64encode(bytes(precompiled_charsmap)).decode("ascii"),
        }

    @staticmethod
    def Replace(pattern, content):
        if isinstance(pattern, Regex):
            pat = {"Regex": pattern.pattern}
        else:
            pat = {"String": pattern}
        return {"type": "Replace", "pattern": pat, "content": content}

    @staticmethod
    def NFKD():
        return {"type": "NFKD"}

    @staticmethod
    def StripAccents():
        return {"type": "StripAccents"}

    @staticmethod
    def BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True):
        return {
            "type": "BertNormalizer",
            "clean_text": clean_text,
            "handle_chinese_chars": handle_chinese_chars,
            "strip_accents": strip_accents,
            "lowercase": lowercase,
        }


_SPLIT_BEHAVIOR = {
    "removed": "Removed",
    "isolated": "Isolated",
    "merged_with_previous": "MergedWithPrevious",
    "merged_with_next": "MergedWithNext",
    "contiguous": "Contiguous",
}


class pre_tokenizers:
    @staticmethod
    def Sequence(items):
        return {"type": "Sequence", "pretokenizers": list(items)}

    @staticmethod
    def Metaspace(replacement="\u2581", prepend_scheme="always", split=True):
        assert prepend_scheme in ("always", "never", "first")
        return {"type": "Metaspace", "replacement": replacement, "prepend_scheme": prepend_scheme, "split": split}

    @staticmethod
    def Punctuation(behavior="isolated"):
        return {"type": "Punctuation", "behavior": _SPLIT_BEHAVIOR[behavior]}

    @staticmethod
    def BertPreTokenizer():
        return {"type": "BertPreTokenizer"}


class decoders:
    @staticmethod
    def Metaspace(replacement="\u2581", prepend_scheme="always", split=True):
        # the same Rust struct as the Metaspace pre-tokenizer
        return pre_tokenizers.Metaspace(replacement, prepend_scheme, split)

    @staticmethod
    def WordPiece(prefix="##", cleanup=True):
        return {"type": "WordPiece", "prefix": prefix, "cleanup": cleanup}


def _template_piece(s):
    """processors/template.rs: Piece::try_from(String)."""
    parts = s.split(":")
    if len(parts) == 2:
        piece = _template_extract_id(parts[0])
        piece[next(iter(piece))]["type_id"] = int(parts[1])
        return piece
    if len(parts) == 1:
        return _template_extract_id(parts[0])
    raise ValueError("Cannot build Piece from string %r" % s)


def _template_extract_id(s):
    if s.startswith("$"):
        rest = s[1:]
        if rest in ("", "A", "a"):
            return {"Sequence": {"id": "A", "type_id": 0}}
        if rest in ("B", "b"):
            return {"Sequence": {"id": "B", "type_id": 0}}
        return {"Sequence": {"id": "A", "type_id": int(rest)}}
    return {"SpecialToken": {"id": s, "type_id": 0}}


class processors:
    @staticmethod
    def TemplateProcessing(single, pair, special_tokens):
        def template(t):
            items = t.split(" ") if isinstance(t, str) else list(t)
            return [_template_piece(x) for x in items]

        tokens = {}
        for content, token_id in special_tokens:
            tokens[content] = {"id": content, "ids": [token_id], "tokens": [content]}
        # Tokens is a HashMap serialized through utils::ordered_map (a BTreeMap)
        ordered = {k: tokens[k] for k in sorted(tokens, key=lambda k: k.encode("utf-8"))}
        return {"type": "TemplateProcessing", "single": template(single), "pair": template(pair), "special_tokens": ordered}


class Unigram:
    def __init__(self, vocab, unk_id, byte_fallback=False):
        self.vocab = [(str(p), float(s)) for p, s in vocab]
        if unk_id is not None and not 0 <= unk_id < len(self.vocab):
            raise ValueError("unk_id not in vocabulary")
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback
        self.token_to_ids = {}
        for i, (piece, _score) in enumerate(self.vocab):
            self.token_to_ids[piece] = i

    def token_to_id(self, token):
        return self.token_to_ids.get(token)

    def get_vocab_size(self):
        return len(self.vocab)

    def to_json(self):
        return {
            "type": "Unigram",
            "unk_id": self.unk_id,
            "vocab": [[p, s] for p, s in self.vocab],
            "byte_fallback": self.byte_fallback,
        }


class WordPiece:
    def __init__(self, vocab, unk_token="[UNK]", continuing_subword_prefix="##", max_input_chars_per_word=100):
        self.vocab = dict(vocab)
        self.vocab_r = {i: t for t, i in self.vocab.items()}
        self.unk_token = unk_token
        self.continuing_subword_prefix = continuing_subword_prefix
        self.max_input_chars_per_word = max_input_chars_per_word

    def token_to_id(self, token):
        return self.vocab.get(token)

    def get_vocab_size(self):
        return len(self.vocab)

    def to_json(self):
        # models/mod.rs OrderedVocabIter: ids 0..=max, holes skipped
        ordered = {}
        if self.vocab_r:
            for i in range(max(self.vocab_r) + 1):
                if i in self.vocab_r:
                    ordered[self.vocab_r[i]] = i
        return {
            "type": "WordPiece",
            "unk_token": self.unk_token,
            "continuing_subword_prefix": self.continuing_subword_prefix,
            "max_input_chars_per_word": self.max_input_chars_per_word,
            "vocab": ordered,
        }


class RustAddedToken:
    """tokenizers::AddedToken (tokenizer/added_vocabulary.rs)."""

    FIELDS = ("content", "single_word", "lstrip", "rstrip", "normalized", "special")

    def __init__(self, content, single_word, lstrip, rstrip, normalized, special):
        self.content = content
        self.single_word = single_word
        self.lstrip = lstrip
        self.rstrip = rstrip
        self.normalized = normalized
        self.special = special

    @classmethod
    def from_content(cls, content, special):
        # AddedToken::from: normalized = !special, the rest false
        return cls(content, False, False, False, not special, special)

    def key(self):
        return tuple(getattr(self, f) for f in self.FIELDS)

    def __eq__(self, other):
        return isinstance(other, RustAddedToken) and self.key() == other.key()


class AddedToken:
    """The Python `tokenizers.AddedToken` of the 0.19.1 bindings (PyAddedToken):
    `special` is a bool, the other options are unset (None) until given."""

    def __init__(self, content=None, single_word=None, lstrip=None, rstrip=None, normalized=None, special=None):
        self.content = content if content is not None else ""
        self.special = bool(special) if special is not None else False
        self.single_word = single_word
        self.lstrip = lstrip
        self.rstrip = rstrip
        self.normalized = normalized

    def get_token(self):
        token = RustAddedToken.from_content(self.content, self.special)
        for field in ("single_word", "lstrip", "rstrip", "normalized"):
            value = getattr(self, field)
            if value is not None:
                setattr(token, field, value)
        return token

    def __getstate__(self):
        t = self.get_token()
        return {f: getattr(t, f) for f in RustAddedToken.FIELDS}

    def __setstate__(self, state):
        for key, value in state.items():
            if key == "content":
                self.content = value
            elif key == "special":
                self.special = value
            elif key in ("single_word", "lstrip", "rstrip", "normalized"):
                setattr(self, key, value)

    def __deepcopy__(self, memo):
        # copy.deepcopy of a PyAddedToken goes through __reduce_ex__: a bare
        # instance from __new__ then __setstate__(__getstate__()), which turns
        # every unset option into the value get_token() resolves at copy time.
        clone = AddedToken()
        clone.__setstate__(self.__getstate__())
        return clone

    def __str__(self):
        return self.content


class AddedVocabulary:
    """tokenizer/added_vocabulary.rs (add_tokens and Serialize)."""

    def __init__(self):
        self.added_tokens_map = {}  # content -> id
        self.added_tokens_map_r = {}  # id -> RustAddedToken

    def token_to_id(self, content, model):
        if content in self.added_tokens_map:
            return self.added_tokens_map[content]
        return model.token_to_id(content)

    def add_tokens(self, tokens, model):
        ignored = 0
        for token in tokens:
            if token.content == "" or any(v == token for v in self.added_tokens_map_r.values()):
                ignored += 1
                continue
            new_id = self.token_to_id(token.content, model)
            if new_id is None:
                if self.added_tokens_map:
                    top = max(self.added_tokens_map.values())
                    if top >= model.get_vocab_size() or model.get_vocab_size() == 0:
                        new_id = top + 1
                    else:
                        new_id = model.get_vocab_size()
                else:
                    new_id = model.get_vocab_size()
            self.added_tokens_map[token.content] = new_id
            self.added_tokens_map_r[new_id] = token
        return len(tokens) - ignored

    def to_json(self):
        out = []
        for token_id in sorted(self.added_tokens_map_r):
            token = self.added_tokens_map_r[token_id]
            entry = {"id": token_id}
            for f in RustAddedToken.FIELDS:
                entry[f] = getattr(token, f)
            out.append(entry)
        return out


class Tokenizer:
    """tokenizers.Tokenizer (what convert_slow_tokenizer returns)."""

    def __init__(self, model):
        self.model = model
        self.normalizer = None
        self.pre_tokenizer = None
        self.post_processor = None
        self.decoder = None
        self.truncation = None
        self.padding = None
        self.added_vocabulary = AddedVocabulary()

    # bindings/python/src/tokenizer.rs
    def add_special_tokens(self, tokens):
        rust_tokens = []
        for token in tokens:
            if isinstance(token, str):
                rust_tokens.append(RustAddedToken.from_content(token, True))
            else:
                token.special = True
                rust_tokens.append(token.get_token())
        return self.added_vocabulary.add_tokens(rust_tokens, self.model)

    def add_tokens(self, tokens):
        rust_tokens = []
        for token in tokens:
            if isinstance(token, str):
                rust_tokens.append(AddedToken(token, special=False).get_token())
            else:
                token.special = False
                rust_tokens.append(token.get_token())
        return self.added_vocabulary.add_tokens(rust_tokens, self.model)

    def no_truncation(self):
        self.truncation = None

    def to_json(self):
        # tokenizer/serialization.rs: field order of the serialized struct
        return collections.OrderedDict(
            [
                ("version", "1.0"),
                ("truncation", self.truncation),
                ("padding", self.padding),
                ("added_tokens", self.added_vocabulary.to_json()),
                ("normalizer", self.normalizer),
                ("pre_tokenizer", self.pre_tokenizer),
                ("post_processor", self.post_processor),
                ("decoder", self.decoder),
                ("model", self.model.to_json()),
            ]
        )

    def to_str_pretty(self):
        return serde_pretty(self.to_json())


# ---------------------------------------------------------------------------
# transformers 4.40.2 slow tokenizers: only what the converters and the special
# token registration read from them.
# ---------------------------------------------------------------------------

SPECIAL_TOKENS_ATTRIBUTES = [
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
    "additional_special_tokens",
]


def all_special_tokens_extended(special):
    """SpecialTokensMixin.all_special_tokens_extended (tokenization_utils_base.py)."""
    tokens, seen = [], set()
    for attr in SPECIAL_TOKENS_ATTRIBUTES:
        value = special.get(attr)
        if not value:
            continue
        if isinstance(value, (list, tuple)):
            to_add = [t for t in value if str(t) not in seen]
        else:
            to_add = [value] if str(value) not in seen else []
        seen.update(map(str, to_add))
        tokens.extend(to_add)
    return tokens


def load_spm_proto(path):
    m = model_pb2.ModelProto()
    with open(path, "rb") as f:
        m.ParseFromString(f.read())
    return m


def load_vocab(vocab_file):
    """models/bert/tokenization_bert.py load_vocab."""
    vocab = collections.OrderedDict()
    with open(vocab_file, "r", encoding="utf-8") as reader:
        tokens = reader.readlines()
    for index, token in enumerate(tokens):
        token = token.rstrip("\n")
        vocab[token] = index
    return vocab


class SlowTokenizer:
    """Base of the stand-ins: `special_kwargs` holds the special-token values the
    slow class passes to PreTrainedTokenizer.__init__ (str or AddedToken)."""

    special_kwargs = {}

    def vocab_lookup(self, token):
        raise NotImplementedError

    def convert_tokens_to_ids(self, token):
        return self.vocab_lookup(str(token))

    @property
    def init_kwargs(self):
        # PreTrainedTokenizerBase.__init__: self.init_kwargs = copy.deepcopy(kwargs)
        return copy.deepcopy(self.special_kwargs)

    def _special(self, name):
        return self.special_kwargs.get(name)

    @property
    def cls_token(self):
        return str(self._special("cls_token"))

    @property
    def sep_token(self):
        return str(self._special("sep_token"))

    @property
    def unk_token(self):
        return str(self._special("unk_token"))

    @property
    def cls_token_id(self):
        return self.convert_tokens_to_ids(self.cls_token)

    @property
    def sep_token_id(self):
        return self.convert_tokens_to_ids(self.sep_token)


class SpmSlowTokenizer(SlowTokenizer):
    def __init__(self, vocab_file):
        self.vocab_file = vocab_file
        self.sp_model = spm.SentencePieceProcessor()
        self.sp_model.Load(vocab_file)

    def vocab_lookup(self, token):
        return self.sp_model.PieceToId(token)


class DebertaV2Tokenizer(SpmSlowTokenizer):
    """models/deberta_v2/tokenization_deberta_v2.py"""

    def __init__(self, vocab_file, do_lower_case=False, split_by_punct=False):
        super().__init__(vocab_file)
        self.do_lower_case = do_lower_case
        self.split_by_punct = split_by_punct
        unk_token = AddedToken("[UNK]", normalized=True, special=True)
        self.special_kwargs = {
            "bos_token": "[CLS]",
            "eos_token": "[SEP]",
            "unk_token": unk_token,
            "sep_token": "[SEP]",
            "pad_token": "[PAD]",
            "cls_token": "[CLS]",
            "mask_token": "[MASK]",
        }


class XLNetTokenizer(SpmSlowTokenizer):
    """models/xlnet/tokenization_xlnet.py"""

    def __init__(self, vocab_file, do_lower_case=False, remove_space=True, keep_accents=False):
        super().__init__(vocab_file)
        self.do_lower_case = do_lower_case
        self.remove_space = remove_space
        self.keep_accents = keep_accents
        # Mask token behave like a normal word, i.e. include the space before it
        mask_token = AddedToken("<mask>", lstrip=True, special=True)
        self.special_kwargs = {
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "sep_token": "<sep>",
            "pad_token": "<pad>",
            "cls_token": "<cls>",
            "mask_token": mask_token,
            "additional_special_tokens": ["<eop>", "<eod>"],
        }


class T5Tokenizer(SpmSlowTokenizer):
    """models/t5/tokenization_t5.py"""

    def __init__(self, vocab_file, extra_ids=100, legacy=None, add_prefix_space=True):
        super().__init__(vocab_file)
        pad_token = AddedToken("<pad>", special=True)
        unk_token = AddedToken("<unk>", special=True)
        eos_token = AddedToken("</s>", special=True)
        self._extra_ids = extra_ids
        additional_special_tokens = ["<extra_id_%d>" % i for i in range(extra_ids)]
        if legacy is None:
            legacy = True
        self.legacy = legacy
        self.add_prefix_space = add_prefix_space
        self.special_kwargs = {
            "eos_token": eos_token,
            "unk_token": unk_token,
            "pad_token": pad_token,
            "additional_special_tokens": additional_special_tokens,
        }

    def vocab_lookup(self, token):
        # T5Tokenizer.get_vocab covers the sentencepiece ids and the extra ids
        if token.startswith("<extra_id_") and token.endswith(">"):
            return self.sp_model.get_piece_size() + self._extra_ids - 1 - int(token[10:-1])
        return self.sp_model.PieceToId(token)


class XLMRobertaTokenizer(SpmSlowTokenizer):
    """models/xlm_roberta/tokenization_xlm_roberta.py (fairseq id layout)"""

    def __init__(self, vocab_file):
        super().__init__(vocab_file)
        # Mask token behave like a normal word, i.e. include the space before it
        mask_token = AddedToken("<mask>", lstrip=True, special=True)
        self.fairseq_tokens_to_ids = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
        self.fairseq_offset = 1
        self.fairseq_tokens_to_ids["<mask>"] = self.sp_model.get_piece_size() + self.fairseq_offset
        self.fairseq_ids_to_tokens = {v: k for k, v in self.fairseq_tokens_to_ids.items()}
        self.special_kwargs = {
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "sep_token": "</s>",
            "pad_token": "<pad>",
            "cls_token": "<s>",
            "mask_token": mask_token,
        }
        # PreTrainedTokenizer.__init__ (tokenization_utils.py) registers the
        # special tokens with _add_tokens: each one takes the id get_vocab()
        # gives it, and convert_tokens_to_ids looks there first.
        vocab = self.get_vocab()
        self._added_tokens_encoder = {}
        for token in all_special_tokens_extended(self.special_kwargs):
            self._added_tokens_encoder.setdefault(str(token), vocab[str(token)])

    @property
    def vocab_size(self):
        return self.sp_model.get_piece_size() + self.fairseq_offset + 1  # Add the <mask> token

    def _convert_id_to_token(self, index):
        if index in self.fairseq_ids_to_tokens:
            return self.fairseq_ids_to_tokens[index]
        return self.sp_model.IdToPiece(index - self.fairseq_offset)

    def get_vocab(self):
        # a dict comprehension: a piece that occurs twice keeps the later id
        return {self._convert_id_to_token(i): i for i in range(self.vocab_size)}

    def _convert_token_to_id(self, token):
        if token in self.fairseq_tokens_to_ids:
            return self.fairseq_tokens_to_ids[token]
        spm_id = self.sp_model.PieceToId(token)
        return spm_id + self.fairseq_offset if spm_id else self._convert_token_to_id(self.unk_token)

    def vocab_lookup(self, token):
        # _convert_token_to_id_with_added_voc
        if token in self._added_tokens_encoder:
            return self._added_tokens_encoder[token]
        return self._convert_token_to_id(token)


class BasicTokenizer:
    def __init__(self, do_lower_case=True, tokenize_chinese_chars=True, strip_accents=None):
        self.do_lower_case = do_lower_case
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.strip_accents = strip_accents


class WordPieceSlowTokenizer(SlowTokenizer):
    def __init__(self, vocab_file, do_lower_case, tokenize_chinese_chars, strip_accents):
        self.vocab_file = vocab_file
        self.vocab = load_vocab(vocab_file)
        self.basic_tokenizer = BasicTokenizer(do_lower_case, tokenize_chinese_chars, strip_accents)

    def vocab_lookup(self, token):
        return self.vocab.get(token, self.vocab.get(self.unk_token))


class BertTokenizer(WordPieceSlowTokenizer):
    """models/bert/tokenization_bert.py"""

    def __init__(self, vocab_file, do_lower_case=True, tokenize_chinese_chars=True, strip_accents=None):
        super().__init__(vocab_file, do_lower_case, tokenize_chinese_chars, strip_accents)
        self.special_kwargs = {
            "unk_token": "[UNK]",
            "sep_token": "[SEP]",
            "pad_token": "[PAD]",
            "cls_token": "[CLS]",
            "mask_token": "[MASK]",
        }


class MPNetTokenizer(WordPieceSlowTokenizer):
    """models/mpnet/tokenization_mpnet.py"""

    def __init__(self, vocab_file, do_lower_case=True, tokenize_chinese_chars=True, strip_accents=None):
        super().__init__(vocab_file, do_lower_case, tokenize_chinese_chars, strip_accents)
        self.special_kwargs = {
            "bos_token": AddedToken("<s>", special=True),
            "eos_token": AddedToken("</s>", special=True),
            "unk_token": AddedToken("[UNK]", special=True),
            "sep_token": AddedToken("</s>", special=True),
            "pad_token": AddedToken("<pad>", special=True),
            "cls_token": AddedToken("<s>", special=True),
            # Mask token behave like a normal word, i.e. include the space before it
            "mask_token": AddedToken("<mask>", lstrip=True, special=True),
        }


# ---------------------------------------------------------------------------
# transformers 4.40.2 src/transformers/convert_slow_tokenizer.py (ported)
# ---------------------------------------------------------------------------


def _get_prepend_scheme(add_prefix_space: bool, original_tokenizer) -> str:
    if add_prefix_space:
        prepend_scheme = "always"
        if hasattr(original_tokenizer, "legacy") and not original_tokenizer.legacy:
            prepend_scheme = "first"
    else:
        prepend_scheme = "never"
    return prepend_scheme


def check_number_comma(piece: str) -> bool:
    return len(piece) < 2 or piece[-1] != "," or not piece[-2].isdigit()


class Converter:
    def __init__(self, original_tokenizer):
        self.original_tokenizer = original_tokenizer

    def converted(self) -> Tokenizer:
        raise NotImplementedError()


class BertConverter(Converter):
    def converted(self) -> Tokenizer:
        vocab = self.original_tokenizer.vocab
        tokenizer = Tokenizer(WordPiece(vocab, unk_token=str(self.original_tokenizer.unk_token)))

        tokenize_chinese_chars = False
        strip_accents = False
        do_lower_case = False
        if hasattr(self.original_tokenizer, "basic_tokenizer"):
            tokenize_chinese_chars = self.original_tokenizer.basic_tokenizer.tokenize_chinese_chars
            strip_accents = self.original_tokenizer.basic_tokenizer.strip_accents
            do_lower_case = self.original_tokenizer.basic_tokenizer.do_lower_case

        tokenizer.normalizer = normalizers.BertNormalizer(
            clean_text=True,
            handle_chinese_chars=tokenize_chinese_chars,
            strip_accents=strip_accents,
            lowercase=do_lower_case,
        )
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()

        cls = str(self.original_tokenizer.cls_token)
        sep = str(self.original_tokenizer.sep_token)
        cls_token_id = self.original_tokenizer.cls_token_id
        sep_token_id = self.original_tokenizer.sep_token_id

        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0",
            pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
            special_tokens=[
                (cls, cls_token_id),
                (sep, sep_token_id),
            ],
        )
        tokenizer.decoder = decoders.WordPiece(prefix="##")

        return tokenizer


class MPNetConverter(Converter):
    def converted(self) -> Tokenizer:
        vocab = self.original_tokenizer.vocab
        tokenizer = Tokenizer(WordPiece(vocab, unk_token=str(self.original_tokenizer.unk_token)))

        tokenize_chinese_chars = False
        strip_accents = False
        do_lower_case = False
        if hasattr(self.original_tokenizer, "basic_tokenizer"):
            tokenize_chinese_chars = self.original_tokenizer.basic_tokenizer.tokenize_chinese_chars
            strip_accents = self.original_tokenizer.basic_tokenizer.strip_accents
            do_lower_case = self.original_tokenizer.basic_tokenizer.do_lower_case

        tokenizer.normalizer = normalizers.BertNormalizer(
            clean_text=True,
            handle_chinese_chars=tokenize_chinese_chars,
            strip_accents=strip_accents,
            lowercase=do_lower_case,
        )
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()

        cls = str(self.original_tokenizer.cls_token)
        sep = str(self.original_tokenizer.sep_token)
        cls_token_id = self.original_tokenizer.cls_token_id
        sep_token_id = self.original_tokenizer.sep_token_id

        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0",
            pair=f"{cls}:0 $A:0 {sep}:0 {sep}:0 $B:1 {sep}:1",  # MPNet uses two [SEP] tokens
            special_tokens=[
                (cls, cls_token_id),
                (sep, sep_token_id),
            ],
        )
        tokenizer.decoder = decoders.WordPiece(prefix="##")

        return tokenizer


class SpmConverter(Converter):
    def __init__(self, *args):
        super().__init__(*args)
        self.proto = load_spm_proto(self.original_tokenizer.vocab_file)
        if self.proto.trainer_spec.byte_fallback:
            raise ValueError("byte_fallback models are not handled by these fixtures")

    def vocab(self, proto):
        return [(piece.piece, piece.score) for piece in proto.pieces]

    def unk_id(self, proto):
        return proto.trainer_spec.unk_id

    def tokenizer(self, proto):
        model_type = proto.trainer_spec.model_type
        vocab_scores = self.vocab(proto)
        unk_id = self.unk_id(proto)

        if model_type == 1:
            tokenizer = Tokenizer(Unigram(vocab_scores, unk_id))
        else:
            # model_type == 2 (BPE) is converted by 4.40.2 too, but no fixture uses it
            raise Exception("only Unigram sentencepiece models are handled here")

        return tokenizer

    def normalizer(self, proto):
        precompiled_charsmap = proto.normalizer_spec.precompiled_charsmap
        _normalizers = [
            normalizers.Strip(left=False, right=True),  # stripping is important
            normalizers.Replace(Regex(" {2,}"), "\u2581"),
        ]
        if not precompiled_charsmap:
            return normalizers.Sequence(_normalizers)
        else:
            return normalizers.Sequence([normalizers.Precompiled(precompiled_charsmap)] + _normalizers)

    def pre_tokenizer(self, replacement, add_prefix_space):
        prepend_scheme = _get_prepend_scheme(add_prefix_space, self.original_tokenizer)
        return pre_tokenizers.Metaspace(replacement=replacement, prepend_scheme=prepend_scheme)

    def post_processor(self):
        return None

    def decoder(self, replacement, add_prefix_space):
        prepend_scheme = _get_prepend_scheme(add_prefix_space, self.original_tokenizer)
        return decoders.Metaspace(replacement=replacement, prepend_scheme=prepend_scheme)

    def converted(self) -> Tokenizer:
        tokenizer = self.tokenizer(self.proto)

        # Tokenizer assemble
        normalizer = self.normalizer(self.proto)
        if normalizer is not None:
            tokenizer.normalizer = normalizer

        replacement = "\u2581"
        add_prefix_space = True
        if hasattr(self.original_tokenizer, "add_prefix_space"):
            add_prefix_space = self.original_tokenizer.add_prefix_space

        pre_tokenizer = self.pre_tokenizer(replacement, add_prefix_space)
        if pre_tokenizer is not None:
            tokenizer.pre_tokenizer = pre_tokenizer

        tokenizer.decoder = self.decoder(replacement, add_prefix_space)
        post_processor = self.post_processor()
        if post_processor:
            tokenizer.post_processor = post_processor

        return tokenizer


class DebertaV2Converter(SpmConverter):
    def pre_tokenizer(self, replacement, add_prefix_space):
        list_pretokenizers = []
        if self.original_tokenizer.split_by_punct:
            list_pretokenizers.append(pre_tokenizers.Punctuation(behavior="isolated"))
        prepend_scheme = _get_prepend_scheme(add_prefix_space, self.original_tokenizer)
        list_pretokenizers.append(pre_tokenizers.Metaspace(replacement=replacement, prepend_scheme=prepend_scheme))
        return pre_tokenizers.Sequence(list_pretokenizers)

    def normalizer(self, proto):
        list_normalizers = []
        if self.original_tokenizer.do_lower_case:
            list_normalizers.append(normalizers.Lowercase())
        list_normalizers.append(normalizers.Strip())

        precompiled_charsmap = proto.normalizer_spec.precompiled_charsmap
        if precompiled_charsmap:
            list_normalizers.append(normalizers.Precompiled(precompiled_charsmap))
        list_normalizers.append(normalizers.Replace(Regex(" {2,}"), " "))

        return normalizers.Sequence(list_normalizers)

    def post_processor(self):
        return processors.TemplateProcessing(
            single="[CLS]:0 $A:0 [SEP]:0",
            pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
            special_tokens=[
                ("[CLS]", self.original_tokenizer.convert_tokens_to_ids("[CLS]")),
                ("[SEP]", self.original_tokenizer.convert_tokens_to_ids("[SEP]")),
            ],
        )


class XLMRobertaConverter(SpmConverter):
    def vocab(self, proto):
        vocab = [
            ("<s>", 0.0),
            ("<pad>", 0.0),
            ("</s>", 0.0),
            ("<unk>", 0.0),
        ]
        vocab += [(piece.piece, piece.score) for piece in proto.pieces[3:]]
        vocab += [("<mask>", 0.0)]
        return vocab

    def unk_id(self, proto):
        unk_id = 3
        return unk_id

    def post_processor(self):
        return processors.TemplateProcessing(
            single="<s> $A </s>",
            pair="<s> $A </s> </s> $B </s>",
            special_tokens=[
                ("<s>", self.original_tokenizer.convert_tokens_to_ids("<s>")),
                ("</s>", self.original_tokenizer.convert_tokens_to_ids("</s>")),
            ],
        )


class XLNetConverter(SpmConverter):
    def vocab(self, proto):
        return [
            (piece.piece, piece.score) if check_number_comma(piece.piece) else (piece.piece, piece.score - 100)
            for piece in proto.pieces
        ]

    def normalizer(self, proto):
        list_normalizers = [
            normalizers.Replace("``", '"'),
            normalizers.Replace("''", '"'),
        ]
        if not self.original_tokenizer.keep_accents:
            list_normalizers.append(normalizers.NFKD())
            list_normalizers.append(normalizers.StripAccents())
        if self.original_tokenizer.do_lower_case:
            list_normalizers.append(normalizers.Lowercase())

        precompiled_charsmap = proto.normalizer_spec.precompiled_charsmap

        if precompiled_charsmap:
            list_normalizers.append(normalizers.Precompiled(precompiled_charsmap))

        list_normalizers.append(normalizers.Replace(Regex(" {2,}"), " "))
        return normalizers.Sequence(list_normalizers)

    def post_processor(self):
        return processors.TemplateProcessing(
            single="$A:0 <sep>:0 <cls>:2",
            pair="$A:0 <sep>:0 $B:1 <sep>:1 <cls>:2",
            special_tokens=[
                ("<sep>", self.original_tokenizer.convert_tokens_to_ids("<sep>")),
                ("<cls>", self.original_tokenizer.convert_tokens_to_ids("<cls>")),
            ],
        )


class T5Converter(SpmConverter):
    def vocab(self, proto):
        num_extra_ids = self.original_tokenizer._extra_ids
        vocab = [(piece.piece, piece.score) for piece in proto.pieces]
        vocab += [(f"<extra_id_{i}>", 0.0) for i in range(num_extra_ids - 1, -1, -1)]
        return vocab

    def post_processor(self):
        return processors.TemplateProcessing(
            single=["$A", "</s>"],
            pair=["$A", "</s>", "$B", "</s>"],
            special_tokens=[
                ("</s>", self.original_tokenizer.convert_tokens_to_ids("</s>")),
            ],
        )


SLOW_TO_FAST_CONVERTERS = {
    "BertTokenizer": BertConverter,
    "DebertaV2Tokenizer": DebertaV2Converter,
    "MPNetTokenizer": MPNetConverter,
    "T5Tokenizer": T5Converter,
    "XLMRobertaTokenizer": XLMRobertaConverter,
    "XLNetTokenizer": XLNetConverter,
}


def convert_slow_tokenizer(transformer_tokenizer) -> Tokenizer:
    converter_class = SLOW_TO_FAST_CONVERTERS[transformer_tokenizer.__class__.__name__]
    return converter_class(transformer_tokenizer).converted()


def fast_tokenizer_from_slow(slow_tokenizer) -> Tokenizer:
    """PreTrainedTokenizerFast.__init__ (tokenization_utils_fast.py) as reached by
    `<Fast>.from_pretrained(dir)` when dir has no tokenizer.json: the slow
    tokenizer is built first (`__slow_tokenizer`), converted, its init_kwargs
    (deep copies of the special tokens it passed on) replace the fast class's
    own special-token arguments, and every special token the backend does not
    know yet is registered with add_special_tokens."""
    fast_tokenizer = convert_slow_tokenizer(slow_tokenizer)
    kwargs = slow_tokenizer.init_kwargs  # kwargs.update(slow_tokenizer.init_kwargs)
    fast_tokenizer.no_truncation()  # `_truncation is None` branch; padding stays unset

    # added_tokens_decoder is {} (no tokenizer_config.json), the backend has no
    # added tokens after conversion, so every special token is to be added.
    encoder = [c for c in fast_tokenizer.added_vocabulary.added_tokens_map]
    tokens_to_add = [t for t in all_special_tokens_extended(kwargs) if str(t) not in encoder]
    all_special = [str(t) for t in all_special_tokens_extended(kwargs)]
    is_last_special = None
    batch = []

    def _add(tokens, special):
        if special:
            fast_tokenizer.add_special_tokens(tokens)
        else:
            fast_tokenizer.add_tokens(tokens)

    for token in tokens_to_add:
        if isinstance(token, AddedToken):
            is_special = token.special or str(token) in all_special
        else:
            is_special = str(token) in all_special
        if is_last_special is None or is_last_special == is_special:
            batch.append(token)
        else:
            _add(batch, is_last_special)
            batch = [token]
        is_last_special = is_special
    if batch:
        _add(batch, is_last_special)
    return fast_tokenizer


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------

T5_TRAIN_ARGS = [
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


@contextlib.contextmanager
def _quiet_stderr(enabled):
    """The sentencepiece trainer logs to the C-level stderr."""
    if not enabled:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def read_corpus(root):
    """The corpus of the reference cases: the listed files joined with '\\n'."""
    with open(os.path.join(root, REFERENCE, "tokenizer", "cases.json"), encoding="utf-8") as f:
        corpus = json.load(f)["corpus"]
    if corpus.get("joined_with") != "\\n":
        raise ValueError("unexpected corpus layout")
    parts = []
    for name in corpus["files"]:
        with open(name, "rb") as f:
            parts.append(f.read())
    data = b"\n".join(parts)
    digest = hashlib.sha256(data).hexdigest()
    if len(data) != corpus["bytes"] or digest != corpus["sha256"]:
        raise ValueError("corpus differs from the reference (%d bytes, sha256 %s)" % (len(data), digest))
    return corpus, data


def train_t5_model(corpus_bytes, out_path, verbose):
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "corpus.txt"), "wb") as f:
            f.write(corpus_bytes)
        cwd = os.getcwd()
        os.chdir(tmp)  # the model records --input and --model_prefix as given
        try:
            with _quiet_stderr(not verbose):
                spm.SentencePieceTrainer.train(" ".join(T5_TRAIN_ARGS))
            with open("spiece.model", "rb") as f:
                model = f.read()
        finally:
            os.chdir(cwd)
    with open(out_path, "wb") as f:
        f.write(model)
    return model


def write_t5_cases(model_path, model_bytes, corpus, out_path):
    sp = spm.SentencePieceProcessor()
    sp.Load(model_path)
    cases = []
    for text in T5_CASE_TEXTS:
        cases.append(
            collections.OrderedDict(
                [
                    ("text", text),
                    ("ids", sp.encode(text, out_type=int)),
                    ("pieces", sp.encode(text, out_type=str)),
                ]
            )
        )
    doc = collections.OrderedDict(
        [
            ("model", "spiece.model"),
            ("spm_train_args", T5_TRAIN_ARGS),
            ("corpus", collections.OrderedDict(
                [
                    ("files", corpus["files"]),
                    ("bytes", corpus["bytes"]),
                    ("sha256", corpus["sha256"]),
                    ("joined_with", corpus["joined_with"]),
                    ("same_as", "tests/data/reference/tokenizer/cases.json corpus"),
                ]
            )),
            ("spm_model_sha256", hashlib.sha256(model_bytes).hexdigest()),
            ("sentencepiece_version", spm.__version__),
            ("special_ids", {"pad": 0, "eos": 1, "unk": 2}),
            ("vocab_size", sp.get_piece_size()),
            ("extra_ids", "T5Tokenizer default extra_ids=100: <extra_id_99> = 1000 ... <extra_id_0> = 1099 (not in spiece.model)"),
            ("note", "Produced by make_fixtures.py. ids = SentencePieceProcessor.encode(text, out_type=int), "
                     "pieces = encode(text, out_type=str), no special tokens added (no </s>); special tokens "
                     "written in the text are not recognised by sentencepiece and are split like any text. "
                     "The T5 tokenizer.json applies its added tokens (</s>, <pad>, <unk>, <extra_id_N>) "
                     "before the model, so its ids differ from these where such tokens occur in the text."),
            ("cases", cases),
        ]
    )
    with open(out_path, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")


def copy_xlm_roberta_model(root, out_path):
    """xlm_roberta/sentencepiece.bpe.model: the XLNet reference model under the
    file name XLMRobertaTokenizer expects (its first pieces <unk>, <s>, </s> are
    those of XLM-R's own model)."""
    src = os.path.join(root, REFERENCE, "tokenizer_xlnet", "spiece.model")
    proto = load_spm_proto(src)
    if [p.piece for p in proto.pieces[:3]] != ["<unk>", "<s>", "</s>"]:
        raise ValueError("%s does not start with <unk>, <s>, </s>" % src)
    shutil.copyfile(src, out_path)
    return out_path


def fixture_specs(root, t5_model_path, xlmr_model_path):
    ref = os.path.join(root, REFERENCE)
    deberta_spm = os.path.join(ref, "tokenizer", "spm.model")
    xlnet_spm = os.path.join(ref, "tokenizer_xlnet", "spiece.model")
    wp = os.path.join(ref, "tokenizer_wordpiece")
    return [
        ("deberta", lambda: DebertaV2Tokenizer(deberta_spm), deberta_spm),
        ("deberta_lower", lambda: DebertaV2Tokenizer(deberta_spm, do_lower_case=True), deberta_spm),
        ("deberta_punct", lambda: DebertaV2Tokenizer(deberta_spm, split_by_punct=True), deberta_spm),
        ("xlnet", lambda: XLNetTokenizer(xlnet_spm), xlnet_spm),
        (
            "xlnet_lower_keep_accents",
            lambda: XLNetTokenizer(xlnet_spm, do_lower_case=True, keep_accents=True),
            xlnet_spm,
        ),
        ("t5", lambda: T5Tokenizer(t5_model_path), t5_model_path),
        ("xlm_roberta", lambda: XLMRobertaTokenizer(xlmr_model_path), xlmr_model_path),
        ("bert_uncased", lambda: BertTokenizer(os.path.join(wp, "vocab_uncased.txt")), None),
        ("bert_cased", lambda: BertTokenizer(os.path.join(wp, "vocab_cased.txt"), do_lower_case=False), None),
        ("mpnet", lambda: MPNetTokenizer(os.path.join(wp, "vocab_mpnet.txt")), None),
    ]


# ---------------------------------------------------------------------------
# Self-checks on the written files
# ---------------------------------------------------------------------------


def verify_fairseq_layout(name, vocab, unk_id, proto):
    """XLM-R ids: <s> <pad> </s> <unk> = 0-3, sentencepiece id i >= 3 -> i + 1,
    <mask> = number of pieces + 1."""
    n = len(proto.pieces)
    assert [p.piece for p in proto.pieces[:3]] == ["<unk>", "<s>", "</s>"], name
    assert len(vocab) == n + 2, name
    assert vocab[:4] == [["<s>", 0.0], ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0]], name
    assert unk_id == 3 and vocab[unk_id][0] == "<unk>", name
    for i in range(3, n):
        p = proto.pieces[i]
        assert vocab[i + 1] == [p.piece, float(p.score)], (name, i)
    assert vocab[n + 1] == ["<mask>", 0.0], name


def verify(name, path, slow, spm_path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    doc = json.loads(text)
    assert list(doc) == ["version", "truncation", "padding", "added_tokens", "normalizer",
                         "pre_tokenizer", "post_processor", "decoder", "model"], name
    model = doc["model"]
    added = doc["added_tokens"]
    ids = [t["id"] for t in added]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), name
    if spm_path is not None:
        proto = load_spm_proto(spm_path)
        assert model["type"] == "Unigram" and model["byte_fallback"] is False, name
        vocab = model["vocab"]
        n = len(proto.pieces)
        if isinstance(slow, XLMRobertaTokenizer):
            verify_fairseq_layout(name, vocab, model["unk_id"], proto)
        else:
            assert model["unk_id"] == proto.trainer_spec.unk_id, name
            for i, p in enumerate(proto.pieces):
                piece, score = vocab[i]
                assert piece == p.piece, (name, i)
                expected = float(p.score)
                if isinstance(slow, XLNetTokenizer) and not check_number_comma(p.piece):
                    expected -= 100
                assert score == expected, (name, i, score, expected)
            extra = vocab[n:]
            if isinstance(slow, T5Tokenizer):
                assert extra == [["<extra_id_%d>" % i, 0.0] for i in range(99, -1, -1)], name
            else:
                assert extra == [], name
        charsmaps = [x["precompiled_charsmap"] for x in doc["normalizer"]["normalizers"] if x["type"] == "Precompiled"]
        assert len(charsmaps) == 1, name
        assert base64.b64decode(charsmaps[0]) == proto.normalizer_spec.precompiled_charsmap, name
        sp = spm.SentencePieceProcessor()
        sp.Load(spm_path)
        lookup = {piece: i for i, (piece, _s) in enumerate(vocab)}
        for t in added:
            if t["content"] in lookup:
                # Unigram::from: a piece listed twice maps to its later id
                assert lookup[t["content"]] == t["id"], (name, t)
                if isinstance(slow, XLMRobertaTokenizer):
                    assert slow.convert_tokens_to_ids(t["content"]) == t["id"], (name, t)
                    if 4 <= t["id"] <= n:
                        assert sp.PieceToId(t["content"]) + 1 == t["id"], (name, t)
                elif t["id"] < n:
                    assert sp.PieceToId(t["content"]) == t["id"], (name, t)
            else:
                assert t["id"] >= len(vocab), (name, t)
    else:
        assert model["type"] == "WordPiece", name
        with open(slow.vocab_file, "rb") as f:
            lines = f.read().decode("utf-8").split("\n")
        assert lines[-1] == "", name
        lines = lines[:-1]
        assert list(model["vocab"].items()) == [(tok, i) for i, tok in enumerate(lines)], name
        for t in added:
            assert model["vocab"][t["content"]] == t["id"], (name, t)
    for key, spec in doc["post_processor"]["special_tokens"].items():
        assert spec["id"] == key and spec["tokens"] == [key], name
        assert spec["ids"] == [slow.convert_tokens_to_ids(key)], name
    return doc


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo_root", nargs="?", default=os.path.join(here, "..", "..", ".."),
                        help="repository root (default: this script's ../../..)")
    parser.add_argument("--verbose", action="store_true", help="show the sentencepiece trainer log")
    args = parser.parse_args()
    root = os.path.normpath(args.repo_root)
    out_root = os.path.join(root, OUTPUT)

    corpus, corpus_bytes = read_corpus(root)
    t5_dir = os.path.join(out_root, "t5")
    os.makedirs(t5_dir, exist_ok=True)
    t5_model_path = os.path.join(t5_dir, "spiece.model")
    t5_model = train_t5_model(corpus_bytes, t5_model_path, args.verbose)
    write_t5_cases(t5_model_path, t5_model, corpus, os.path.join(t5_dir, "cases.json"))

    xlmr_dir = os.path.join(out_root, "xlm_roberta")
    os.makedirs(xlmr_dir, exist_ok=True)
    xlmr_model_path = copy_xlm_roberta_model(root, os.path.join(xlmr_dir, "sentencepiece.bpe.model"))

    for name, make_slow, spm_path in fixture_specs(root, t5_model_path, xlmr_model_path):
        slow = make_slow()
        fast = fast_tokenizer_from_slow(slow)
        out_dir = os.path.join(out_root, name)
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, "tokenizer.json")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(fast.to_str_pretty())
        doc = verify(name, path, slow, spm_path)
        print("%-26s %8d bytes  %d added tokens" % (name + "/tokenizer.json", os.path.getsize(path), len(doc["added_tokens"])))
    print("%-26s %8d bytes" % ("t5/spiece.model", os.path.getsize(t5_model_path)))
    print("%-26s %8d bytes" % ("t5/cases.json", os.path.getsize(os.path.join(t5_dir, "cases.json"))))
    print("%-26s %8d bytes" % ("xlm_roberta/sentencepiece.bpe.model", os.path.getsize(xlmr_model_path)))


if __name__ == "__main__":
    main()
