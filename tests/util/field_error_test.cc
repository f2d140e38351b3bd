// Structured field errors: the detail travels with a status, through prefixes and StatusOr,
// independent of the message.
#include "server/util/field_error.h"

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

TEST(FieldErrorTest, DetailTravelsWithTheStatus) {
  const absl::Status s = FieldError(FieldErrorKind::kEmpty, "inputs[2].text", "whatever the words");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "whatever the words");
  auto d = FieldErrorOf(s);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, FieldErrorKind::kEmpty);
  EXPECT_EQ(d->field, "inputs[2].text");
  const absl::StatusOr<int> through = s;
  EXPECT_EQ(FieldErrorOf(through.status())->field, "inputs[2].text");
  EXPECT_FALSE(FieldErrorOf(absl::InvalidArgumentError("inputs is empty")).has_value());
  EXPECT_TRUE(WithFieldError(absl::OkStatus(), FieldErrorKind::kInvalid, "x").ok());
}

TEST(FieldErrorTest, PrefixJoinsThePathAndKeepsTheKind) {
  const absl::Status inner = FieldError(FieldErrorKind::kOutOfVocabulary, "input_ids[7]", "input_ids[7] = 9 is out");
  const absl::Status outer = PrefixFieldError("inputs[3].tokens", inner);
  EXPECT_EQ(outer.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(outer.message(), "inputs[3].tokens: input_ids[7] = 9 is out");
  auto d = FieldErrorOf(outer);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, FieldErrorKind::kOutOfVocabulary);
  EXPECT_EQ(d->field, "inputs[3].tokens.input_ids[7]");
  // A status without a detail gets the prefix's field, kind kInvalid.
  auto plain = FieldErrorOf(PrefixFieldError("documents[1]", absl::FailedPreconditionError("no")));
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->kind, FieldErrorKind::kInvalid);
  EXPECT_EQ(plain->field, "documents[1]");
}

TEST(FieldErrorTest, Root) {
  EXPECT_EQ(FieldRoot("inputs[2].text"), "inputs");
  EXPECT_EQ(FieldRoot("parameters.candidate_labels"), "parameters");
  EXPECT_EQ(FieldRoot("dimensions"), "dimensions");
  EXPECT_EQ(FieldRoot(""), "");
}

}  // namespace
}  // namespace relserve
