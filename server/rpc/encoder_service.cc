#include "server/rpc/encoder_service.h"

#include <chrono>

#include "server/rpc/embed_stream.h"
#include "server/rpc/message_codec.h"
#include "server/rpc/proto_conversion.h"
#include "server/rpc/unary_call.h"

namespace relserve {
namespace {

absl::Time DeadlineOf(const grpc::CallbackServerContext* ctx) {
  const auto d = ctx->deadline();
  if (d == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(d);
}

template <typename Request, typename Response>
CallContext ContextOf(const grpc::CallbackServerContext* ctx, const UnaryCall<Request, Response>* call) {
  return CallContext{DeadlineOf(ctx), call->cancelled()};
}

// The serving layer's answer to a unary call: the response on success, then the reply.
template <typename Request, typename Response>
auto Answer(UnaryCall<Request, Response>* call) {
  return [call](auto result) {
    if (result.ok()) ToProto(std::move(*result), &call->response);
    call->Reply(result.status(), call->request.model());
  };
}

}  // namespace

EncoderService::EncoderService(const EncoderServing* serving, const ModelRegistry* registry, ServerMetrics* metrics,
                               const ApiKeys* api_keys)
    : serving_(serving),
      metrics_(metrics),
      api_keys_(api_keys),
      tracker_(registry, serving->limits().max_response_bytes) {
  InstallProtobufLogFilter();  // before any call is parsed
}

absl::Status EncoderService::Authenticate(const grpc::CallbackServerContext* ctx) const {
  if (api_keys_ == nullptr) return absl::OkStatus();
  std::optional<std::string_view> authorization;
  const auto& metadata = ctx->client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = std::string_view(it->second.data(), it->second.size());
  }
  absl::Status status = api_keys_->Check(authorization);
  if (!status.ok() && metrics_ != nullptr) metrics_->RecordUnauthenticated("grpc");
  return status;
}

void EncoderService::HandleEmbed(absl::Time deadline, std::shared_ptr<const std::atomic<bool>> cancelled,
                                 const v1::EmbedRequest& request, v1::EmbedResponse* response, Reply reply) const {
  auto embed = FromProto(request);
  if (!embed.ok()) return reply(embed.status(), request.model());
  serving_->Embed(*embed, CallContext{deadline, std::move(cancelled)},
                  [response, reply = std::move(reply), model = request.model()](absl::StatusOr<EmbedResult> r) {
                    if (r.ok()) ToProto(std::move(*r), response);
                    reply(r.status(), model);
                  });
}

grpc::ServerUnaryReactor* EncoderService::Embed(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes,
                                                grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::EmbedRequest, v1::EmbedResponse>(&tracker_, metrics_, "Embed", out);
  if (!call->Begin(*bytes, Authenticate(ctx))) return call;
  HandleEmbed(DeadlineOf(ctx), call->cancelled(), call->request, &call->response,
              [call](const absl::Status& s, const std::string& model) { call->Reply(s, model); });
  return call;
}

grpc::ServerUnaryReactor* EncoderService::EmbedTokens(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes,
                                                      grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::EmbedTokensRequest, v1::EmbedTokensResponse>(&tracker_, metrics_, "EmbedTokens", out);
  if (!call->Begin(*bytes, Authenticate(ctx))) return call;
  auto request = FromProto(call->request);
  if (!request.ok()) {
    call->Reply(request.status(), call->request.model());
    return call;
  }
  serving_->EmbedTokens(*request, ContextOf(ctx, call), Answer(call));
  return call;
}

grpc::ServerUnaryReactor* EncoderService::Rerank(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes,
                                                 grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::RerankRequest, v1::RerankResponse>(&tracker_, metrics_, "Rerank", out);
  if (!call->Begin(*bytes, Authenticate(ctx))) return call;
  auto request = FromProto(call->request);
  if (!request.ok()) {
    call->Reply(request.status(), call->request.model());
    return call;
  }
  serving_->Rerank(*request, ContextOf(ctx, call), Answer(call));
  return call;
}

grpc::ServerUnaryReactor* EncoderService::Classify(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes,
                                                   grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::ClassifyRequest, v1::ClassifyResponse>(&tracker_, metrics_, "Classify", out);
  if (!call->Begin(*bytes, Authenticate(ctx))) return call;
  auto request = FromProto(call->request);
  if (!request.ok()) {
    call->Reply(request.status(), call->request.model());
    return call;
  }
  serving_->Classify(*request, ContextOf(ctx, call), Answer(call));
  return call;
}

grpc::ServerUnaryReactor* EncoderService::ZeroShotClassify(grpc::CallbackServerContext* ctx,
                                                           const grpc::ByteBuffer* bytes, grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::ZeroShotClassifyRequest, v1::ZeroShotClassifyResponse>(&tracker_, metrics_,
                                                                                        "ZeroShotClassify", out);
  if (!call->Begin(*bytes, Authenticate(ctx))) return call;
  auto request = FromProto(call->request);
  if (!request.ok()) {
    call->Reply(request.status(), call->request.model());
    return call;
  }
  serving_->ZeroShotClassify(*request, ContextOf(ctx, call), Answer(call));
  return call;
}

grpc::ServerUnaryReactor* EncoderService::ClassifyTokens(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* bytes, grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::ClassifyTokensRequest, v1::ClassifyTokensResponse>(&tracker_, metrics_,
                                                                                    "ClassifyTokens", out);
  if (!call->Begin(*bytes, Authenticate(ctx))) return call;
  auto request = FromProto(call->request);
  if (!request.ok()) {
    call->Reply(request.status(), call->request.model());
    return call;
  }
  serving_->ClassifyTokens(*request, ContextOf(ctx, call), Answer(call));
  return call;
}

grpc::ServerUnaryReactor* EncoderService::Tokenize(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes,
                                                   grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::TokenizeRequest, v1::TokenizeResponse>(&tracker_, metrics_, "Tokenize", out);
  if (!call->Begin(*bytes, Authenticate(ctx))) return call;
  auto request = FromProto(call->request);
  if (!request.ok()) {
    call->Reply(request.status(), call->request.model());
    return call;
  }
  Answer(call)(serving_->Tokenize(*request, ContextOf(ctx, call)));
  return call;
}

grpc::ServerUnaryReactor* EncoderService::ListModels(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes,
                                                     grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::ListModelsRequest, v1::ListModelsResponse>(&tracker_, metrics_, "ListModels", out);
  if (!call->Begin(*bytes, Authenticate(ctx))) return call;
  ToProto(serving_->ListModels(), serving_->default_model(), &call->response);
  call->Reply(absl::OkStatus(), serving_->default_model());
  return call;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* EncoderService::EmbedStream(
    grpc::CallbackServerContext* ctx) {
  return NewEmbedStream(this, &tracker_, metrics_, DeadlineOf(ctx), Authenticate(ctx));
}

}  // namespace relserve
