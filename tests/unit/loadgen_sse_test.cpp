// k25-bench's SSE handling: events split anywhere in the byte stream, CRLF, comments, multi-line
// data, [DONE], usage chunks and error bodies.
#include <gtest/gtest.h>

#include "loadgen/sse_parser.h"

namespace k25::loadgen {
namespace {

const std::string kStream =
    "data: {\"choices\":[{\"text\":\"Once\",\"index\":0}]}\n\n"
    ": keep-alive comment\n\n"
    "data: {\"choices\":[{\"text\":\" upon\",\"index\":0}]}\n\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n"
    "data: [DONE]\n\n";

TEST(LoadgenSse, WholeStream) {
  SseParser p;
  auto events = p.feed(kStream);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[3], "[DONE]");
  EXPECT_FALSE(p.finish());
}

TEST(LoadgenSse, SplitAtEveryByte) {
  for (size_t cut = 1; cut < kStream.size(); ++cut) {
    SseParser p;
    auto a = p.feed(kStream.substr(0, cut));
    auto b = p.feed(kStream.substr(cut));
    a.insert(a.end(), b.begin(), b.end());
    ASSERT_EQ(a.size(), 4u) << "cut at " << cut;
    EXPECT_EQ(a[1], "{\"choices\":[{\"text\":\" upon\",\"index\":0}]}");
  }
  // One byte at a time.
  SseParser p;
  std::vector<std::string> all;
  for (char c : kStream) {
    for (auto& e : p.feed(std::string(1, c))) all.push_back(e);
  }
  EXPECT_EQ(all.size(), 4u);
}

TEST(LoadgenSse, CrlfMultiLineAndNoSpace) {
  SseParser p;
  auto events = p.feed("event: message\r\ndata:first\r\ndata: second\r\n\r\nid: 3\r\n\r\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], "first\nsecond");
}

TEST(LoadgenSse, UnterminatedLastEvent) {
  SseParser p;
  EXPECT_TRUE(p.feed("data: [DONE]").empty());
  auto last = p.finish();
  ASSERT_TRUE(last);
  EXPECT_EQ(*last, "[DONE]");
}

TEST(LoadgenSse, InterpretChunks) {
  CompletionEvent done = interpret_event("[DONE]");
  EXPECT_EQ(done.kind, CompletionEvent::Kind::Done);

  CompletionEvent text = interpret_event(R"({"choices":[{"text":"hi","index":0}],"usage":null})");
  EXPECT_EQ(text.kind, CompletionEvent::Kind::Chunk);
  EXPECT_EQ(text.text, "hi");
  EXPECT_FALSE(text.completion_tokens);

  CompletionEvent chat = interpret_event(R"({"choices":[{"delta":{"content":"yo"}}]})");
  EXPECT_EQ(chat.text, "yo");

  CompletionEvent usage =
      interpret_event(R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":8}})");
  EXPECT_EQ(usage.kind, CompletionEvent::Kind::Chunk);
  EXPECT_TRUE(usage.text.empty());
  EXPECT_EQ(usage.prompt_tokens, 12);
  EXPECT_EQ(usage.completion_tokens, 8);
}

TEST(LoadgenSse, ErrorsInTheStreamAndInBodies) {
  CompletionEvent e = interpret_event(R"({"error":{"message":"engine failed","code":500}})");
  EXPECT_EQ(e.kind, CompletionEvent::Kind::Error);
  EXPECT_EQ(e.error, "engine failed");
  CompletionEvent junk = interpret_event("not json");
  EXPECT_EQ(junk.kind, CompletionEvent::Kind::Error);
  EXPECT_NE(junk.error.find("not a JSON object"), std::string::npos);

  EXPECT_EQ(error_message_of(R"({"error":{"message":"queue is full","type":"rate_limit"}})"),
            "queue is full");
  EXPECT_EQ(error_message_of(R"({"error":"bad"})"), "bad");
  EXPECT_EQ(error_message_of("<html>502 Bad Gateway</html>\nmore"), "<html>502 Bad Gateway</html>");
  EXPECT_EQ(error_message_of(""), "empty body");
}

}  // namespace
}  // namespace k25::loadgen
