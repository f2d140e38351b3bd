#include "client/rpc_commands.h"

#include "server/util/utf8.h"

#include <chrono>
#include <functional>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "client/exit_codes.h"
#include "client/input_parsing.h"
#include "client/request_building.h"
#include "client/response_json.h"
#include "relserve/v1/encoder.grpc.pb.h"

namespace relserve::client {
namespace {

using Stub = v1::Encoder::Stub;

template <typename Request, typename Response>
using Method = grpc::Status (Stub::*)(grpc::ClientContext*, const Request&, Response*);

// One call: the response as a JSON line on `out`, or the status as ErrorJson on `err`.
template <typename Request, typename Response>
int Call(Stub& stub, Method<Request, Response> method, const Request& request, const ClientCommand& c,
         std::ostream& out, std::ostream& err) {
  grpc::ClientContext context;
  const int64_t deadline_ms = c.connection.deadline_ms > 0 ? c.connection.deadline_ms : DefaultDeadlineMs(c.name);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  Response response;
  const grpc::Status status = (stub.*method)(&context, request, &response);
  if (!status.ok()) {
    err << ErrorJson(StatusCodeName(status.error_code()), status.error_message()).dump() << std::endl;
    return kExitRpcError;
  }
  out << ToJson(response).dump() << std::endl;
  return kExitOk;
}

int InputError(std::ostream& err, const std::string& message) {
  err << ErrorJson("INVALID_ARGUMENT", message).dump() << std::endl;
  return kExitUsage;
}

// Feeds `send` the inputs: all arguments at once, or standard input's JSON lines in groups of
// --batch-size. Stops at the first non-zero exit code.
int ForEachInputBatch(const ClientCommand& c, std::istream& in, std::ostream& err,
                      const std::function<int(std::vector<v1::Input>)>& send) {
  if (!c.args.empty()) {
    auto inputs = InputsFromArgs(c.args, c.request.pairs, c.request.ids);
    if (!inputs.ok()) return InputError(err, std::string(inputs.status().message()));
    return send(std::move(*inputs));
  }
  std::vector<v1::Input> batch;
  std::string line;
  int line_number = 0, inputs = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (IsBlankLine(line)) continue;
    ++inputs;
    auto input = ParseInputLine(line);
    if (!input.ok()) {
      return InputError(err, absl::StrCat("standard input line ", line_number, ": ", input.status().message()));
    }
    batch.push_back(std::move(*input));
    if (static_cast<int>(batch.size()) == c.request.batch_size) {
      if (int code = send(std::move(batch)); code != kExitOk) return code;
      batch.clear();
    }
  }
  if (!batch.empty()) return send(std::move(batch));
  if (inputs == 0) return InputError(err, "no inputs: give them as arguments or as JSON lines on standard input");
  return kExitOk;
}

int RunRerank(Stub& stub, const ClientCommand& c, std::istream& in, std::ostream& out, std::ostream& err) {
  if (!c.args.empty()) {
    // Text goes out in protobuf strings, which must be UTF-8: the server would refuse it.
    if (absl::Status s = ValidateUtf8(c.request.query, "--query"); !s.ok()) return InputError(err, std::string(s.message()));
    for (size_t i = 0; i < c.args.size(); ++i) {
      if (absl::Status s = ValidateUtf8(c.args[i], absl::StrCat("argument ", i + 1)); !s.ok()) {
        return InputError(err, std::string(s.message()));
      }
    }
    return Call(stub, &Stub::Rerank, BuildRerankRequest(c.request, c.request.query, c.args), c, out, err);
  }
  std::string line;
  int line_number = 0, requests = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (IsBlankLine(line)) continue;
    auto parsed = ParseRerankLine(line);
    if (!parsed.ok()) {
      return InputError(err, absl::StrCat("standard input line ", line_number, ": ", parsed.status().message()));
    }
    ++requests;
    const v1::RerankRequest request = BuildRerankRequest(c.request, parsed->query, parsed->documents);
    if (int code = Call(stub, &Stub::Rerank, request, c, out, err); code != kExitOk) return code;
  }
  if (requests == 0) return InputError(err, "no inputs: give --query and documents, or JSON lines on standard input");
  return kExitOk;
}

// The texts as arguments, or one per line of standard input, as it is.
int RunZeroShot(Stub& stub, const ClientCommand& c, std::istream& in, std::ostream& out, std::ostream& err) {
  if (c.request.labels.empty()) return InputError(err, "zero-shot needs --labels A,B,...");
  std::vector<std::string> texts = c.args;
  if (texts.empty()) {
    std::string line;
    while (std::getline(in, line)) {
      if (IsBlankLine(line)) continue;
      texts.push_back(line);
    }
  }
  if (texts.empty()) return InputError(err, "no texts: give them as arguments or one per line on standard input");
  for (size_t i = 0; i < texts.size(); ++i) {
    if (absl::Status s = ValidateUtf8(texts[i], absl::StrCat("text ", i + 1)); !s.ok()) {
      return InputError(err, std::string(s.message()));
    }
  }
  return Call(stub, &Stub::ZeroShotClassify, BuildZeroShotRequest(c.request, texts), c, out, err);
}

// ner: the texts as arguments, or one per line of standard input, as it is.
int RunNer(Stub& stub, const ClientCommand& c, std::istream& in, std::ostream& out, std::ostream& err) {
  std::vector<std::string> texts = c.args;
  if (texts.empty()) {
    std::string line;
    while (std::getline(in, line)) {
      if (IsBlankLine(line)) continue;
      texts.push_back(line);
    }
  }
  if (texts.empty()) return InputError(err, "no texts: give them as arguments or one per line on standard input");
  for (size_t i = 0; i < texts.size(); ++i) {
    if (absl::Status s = ValidateUtf8(texts[i], absl::StrCat("text ", i + 1)); !s.ok()) {
      return InputError(err, std::string(s.message()));
    }
  }
  return Call(stub, &Stub::ClassifyTokens, BuildClassifyTokensRequest(c.request, texts), c, out, err);
}

}  // namespace

int RunRpcCommand(const ClientCommand& c, const std::shared_ptr<grpc::Channel>& channel, std::istream& in,
                  std::ostream& out, std::ostream& err) {
  auto stub = v1::Encoder::NewStub(channel);
  const RequestOptions& o = c.request;
  if (c.name == "models") return Call(*stub, &Stub::ListModels, v1::ListModelsRequest(), c, out, err);
  if (c.name == "rerank") return RunRerank(*stub, c, in, out, err);
  if (c.name == "zero-shot") return RunZeroShot(*stub, c, in, out, err);
  if (c.name == "ner") return RunNer(*stub, c, in, out, err);
  return ForEachInputBatch(c, in, err, [&](std::vector<v1::Input> inputs) {
    if (c.name == "embed") return Call(*stub, &Stub::Embed, BuildEmbedRequest(o, std::move(inputs)), c, out, err);
    if (c.name == "embed-tokens") {
      return Call(*stub, &Stub::EmbedTokens, BuildEmbedTokensRequest(o, std::move(inputs)), c, out, err);
    }
    if (c.name == "classify") {
      return Call(*stub, &Stub::Classify, BuildClassifyRequest(o, std::move(inputs)), c, out, err);
    }
    return Call(*stub, &Stub::Tokenize, BuildTokenizeRequest(o, std::move(inputs)), c, out, err);
  });
}

}  // namespace relserve::client
