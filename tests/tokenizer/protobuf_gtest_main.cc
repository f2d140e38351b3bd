// gtest main for the tests that load SentencePiece: it makes the process depend on the system
// libprotobuf before any tokenizer loads, the situation in which Debian's libsentencepiece
// aborts unless it sits in its own RTLD_LOCAL | RTLD_DEEPBIND module.

#include <google/protobuf/stubs/common.h>

#include "gtest/gtest.h"

int main(int argc, char** argv) {
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  google::protobuf::ShutdownProtobufLibrary();
  return result;
}
