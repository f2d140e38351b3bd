#include "server/util/flag_table.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;

struct Options {
  int count = 3;
  bool verbose = false;
  std::string mode = "fast";
  double seconds = 1.5;
  std::vector<std::string> items;
  std::string only_b;
};

FlagTable<Options> Table(FlagTableOptions options) {
  return FlagTable<Options>(
      {
          IntFlag("count", "how many", Field(&Options::count), 1),
          BoolFlag("verbose", "say more", Field(&Options::verbose)),
          StringFlag("mode", "MODE", "fast or slow", Field(&Options::mode), {"fast", "slow"}),
          NumberFlag("seconds", "S", "how long", Field(&Options::seconds), 0, 10, "a number of seconds in [0, 10]"),
          CustomFlag<Options>("item", "X", "an item (repeatable)",
                              [](const std::string& v, Options* o) {
                                o->items.push_back(v);
                                return absl::OkStatus();
                              })
              .Repeatable(),
          StringFlag("only-b", "V", "for b only", Field(&Options::only_b)).For({"b"}).In("b flags").NoDefault(),
      },
      std::move(options));
}

FlagTableOptions Env() {
  FlagTableOptions o;
  o.environment_prefix = "TOOL_";
  o.every_flag_from_environment = true;
  return o;
}

TEST(FlagTableTest, ValuesInBothFormsAndBareBooleans) {
  Options o;
  auto r = Table({}).Parse({"--count", "7", "--mode=slow", "--verbose", "--seconds", "2.5"}, {}, &o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(o.count, 7);
  EXPECT_EQ(o.mode, "slow");
  EXPECT_TRUE(o.verbose);
  EXPECT_EQ(o.seconds, 2.5);
  EXPECT_EQ(r->origin.at("count"), "--count");
  // Without positional arguments a boolean takes a following value that is not a flag.
  Options off;
  ASSERT_TRUE(Table({}).Parse({"--verbose", "false", "--count", "2"}, {}, &off).ok());
  EXPECT_FALSE(off.verbose);
  Options last;
  ASSERT_TRUE(Table({}).Parse({"--count", "2", "--count=5", "--verbose"}, {}, &last).ok());
  EXPECT_EQ(last.count, 5);  // the last value wins
  EXPECT_TRUE(last.verbose);
}

TEST(FlagTableTest, ErrorsNameTheFlagTheValueAndWhatWasExpected) {
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {{"--frobnicate", "1"}, "unknown flag --frobnicate (known: --count, --verbose, --mode, --seconds, --item, --only-b)"},
           {{"--count"}, "--count needs a value"},
           {{"--count", "x"}, "--count: \"x\" is not an integer >= 1"},
           {{"--count=0"}, "--count: \"0\" is not an integer >= 1"},
           {{"--verbose=yes"}, "--verbose: \"yes\" is not true or false"},
           {{"--verbose", "maybe"}, "--verbose: \"maybe\" is not true or false"},
           {{"--mode", "medium"}, "--mode: \"medium\" is not one of fast, slow"},
           {{"--seconds", "11"}, "--seconds: \"11\" is not a number of seconds in [0, 10]"},
           {{"--seconds", "nan"}, "--seconds: \"nan\" is not a number of seconds in [0, 10]"},
           {{"stray"}, "unexpected argument \"stray\""},
           {{"--", "--count"}, "unexpected argument \"--count\""},
       }) {
    Options o;
    auto r = Table({}).Parse(c.args, {}, &o);
    ASSERT_FALSE(r.ok()) << c.error;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.error);
  }
}

TEST(FlagTableTest, RepeatableFlagsAddUp) {
  Options o;
  ASSERT_TRUE(Table({}).Parse({"--item", "a", "--item=b"}, {}, &o).ok());
  EXPECT_EQ(o.items, (std::vector<std::string>{"a", "b"}));
}

TEST(FlagTableTest, EnvironmentFillsWhatTheCommandLineLeavesOut) {
  EXPECT_EQ(FlagVariableName("TOOL_", "only-b"), "TOOL_ONLY_B");
  Options o;
  auto r = Table(Env()).Parse({"--count", "4"},
                              {{"TOOL_COUNT", "9"}, {"TOOL_MODE", "slow"}, {"TOOL_ITEM", " a, b ,c"}, {"OTHER", "x"}}, &o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(o.count, 4);  // the command line wins
  EXPECT_EQ(o.mode, "slow");
  EXPECT_EQ(o.items, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(r->origin.at("mode"), "TOOL_MODE");
  EXPECT_EQ(r->origin.at("count"), "--count");
  // A repeatable flag given on the command line at all overrides its variable.
  Options cl;
  ASSERT_TRUE(Table(Env()).Parse({"--item", "z"}, {{"TOOL_ITEM", "a,b"}}, &cl).ok());
  EXPECT_EQ(cl.items, (std::vector<std::string>{"z"}));
  // Errors name the variable, and an empty item is refused.
  Options bad;
  EXPECT_EQ(Table(Env()).Parse({}, {{"TOOL_COUNT", "lots"}}, &bad).status().message(),
            "TOOL_COUNT (environment): --count: \"lots\" is not an integer >= 1");
  EXPECT_EQ(Table(Env()).Parse({}, {{"TOOL_ITEM", "a,,b"}}, &bad).status().message(),
            "TOOL_ITEM (environment): item 2 of 3 is empty (items are separated by commas)");
  // Without a prefix, or for a flag not marked, nothing is read.
  Options none;
  ASSERT_TRUE(Table({}).Parse({}, {{"TOOL_COUNT", "9"}}, &none).ok());
  EXPECT_EQ(none.count, 3);
  FlagTableOptions marked;
  marked.environment_prefix = "TOOL_";
  FlagTable<Options> one({IntFlag("count", "how many", Field(&Options::count), 1),
                          StringFlag("mode", "MODE", "m", Field(&Options::mode)).FromEnvironment()},
                         marked);
  Options some;
  ASSERT_TRUE(one.Parse({}, {{"TOOL_COUNT", "9"}, {"TOOL_MODE", "slow"}}, &some).ok());
  EXPECT_EQ(some.count, 3);
  EXPECT_EQ(some.mode, "slow");
  EXPECT_EQ(one.Variables(), (std::set<std::string>{"TOOL_MODE"}));
}

TEST(FlagTableTest, HelpWinsAndIsNotApplied) {
  Options o;
  auto r = Table({}).Parse({"--count", "x", "--frobnicate", "--help", "--count"}, {}, &o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->help);
  EXPECT_EQ(o.count, 3);
  auto h = Table({}).Parse({"-h"}, {}, &o);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->help);
  // After "--" it is an argument like any other.
  FlagTableOptions positional;
  positional.positional_arguments = true;
  auto after = Table(positional).Parse({"--", "--help"}, {}, &o);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->help);
  EXPECT_EQ(after->arguments, (std::vector<std::string>{"--help"}));
}

TEST(FlagTableTest, SubcommandsAndWhereFlagsApply) {
  FlagTableOptions sub;
  sub.subcommands = {"a", "b"};
  Options o;
  // Flags may come before the subcommand; a boolean never takes the next argument here.
  auto r = Table(sub).Parse({"--verbose", "b", "--only-b", "v", "x", "-", "--", "--count"}, {}, &o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->command, "b");
  EXPECT_TRUE(o.verbose);
  EXPECT_EQ(o.only_b, "v");
  EXPECT_EQ(r->arguments, (std::vector<std::string>{"x", "-", "--count"}));
  EXPECT_EQ(Table(sub).Parse({"a", "--only-b", "v"}, {}, &o).status().message(), "--only-b does not apply to a");
  EXPECT_EQ(Table(sub).Parse({"c"}, {}, &o).status().message(), "unknown subcommand \"c\" (see --help)");
  EXPECT_EQ(Table(sub).Parse({"--count", "2"}, {}, &o).status().message(), "no subcommand given (see --help)");
  auto help = Table(sub).Parse({"--help", "b"}, {}, &o);
  ASSERT_TRUE(help.ok());
  EXPECT_TRUE(help->help);
  EXPECT_EQ(help->command, "b");
}

TEST(FlagTableTest, HelpListsEveryFlagWithItsVariableAndDefault) {
  Options defaults;
  defaults.count = 8;
  const FlagTable<Options> table = Table(Env());
  const std::string help = table.Help(defaults);
  EXPECT_THAT(help, HasSubstr("flags:\n  --count N  $TOOL_COUNT\n      how many (default: 8)\n"));
  EXPECT_THAT(help, HasSubstr("  --verbose true|false  $TOOL_VERBOSE\n      say more (default: false)\n"));
  EXPECT_THAT(help, HasSubstr("  --mode MODE  $TOOL_MODE\n      fast or slow (default: fast)\n"));
  EXPECT_THAT(help, HasSubstr("  --seconds S  $TOOL_SECONDS\n      how long (default: 1.5)\n"));
  EXPECT_THAT(help, HasSubstr("\nb flags:\n  --only-b V  $TOOL_ONLY_B\n      for b only [b]\n"));
  for (const auto& f : table.flags()) EXPECT_THAT(help, HasSubstr("--" + f.name + " ")) << f.name;
  // One subcommand's help: only its flags, without the [b] mark; no environment: no variables.
  const std::string a = Table({}).Help(defaults, "a");
  EXPECT_THAT(a, HasSubstr("  --count N\n"));
  EXPECT_THAT(a, ::testing::Not(HasSubstr("only-b")));
  EXPECT_THAT(Table({}).Help(defaults, "b"), HasSubstr("  --only-b V\n      for b only\n"));
}

}  // namespace
}  // namespace relserve
