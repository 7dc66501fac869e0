// smol-server over real sockets: the refusals each bad request gets (status and
// OpenAI's error body), the queue limit, a client that disconnects mid-stream, replies
// served side by side that equal those served alone, the prompt cache across turns,
// and SIGTERM with a reply in flight. The openai npm client and the browser test the
// same server from the outside (tests/server/).
#include <doctest/doctest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>
#include "nested_json.hpp"
#include "scratch_dir.hpp"
#include "smol/gguf/writer.hpp"
#include "smol/template/known_chat_templates.hpp"

namespace {

using Json = nlohmann::json;

const std::string kFixture = std::string(SMOL_FIXTURES_DIR) + "/tiny-smollm3-a.q4_k_m.gguf";

// A smol-server process on a free port, stopped (SIGTERM) when it goes out of scope.
class ServerProcess {
 public:
  explicit ServerProcess(std::vector<std::string> args, const std::string& model = kFixture) {
    args.insert(args.begin(), {SMOL_SERVER_BINARY, "-m", model, "-t", "1", "--port", "0"});
    int pipe_fds[2];
    REQUIRE(pipe(pipe_fds) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      dup2(pipe_fds[1], STDERR_FILENO);
      close(pipe_fds[0]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(pipe_fds[1]);
    log_ = fdopen(pipe_fds[0], "r");
    // Read stderr until the server says where it listens.
    char line[4096];
    const std::string_view listening = "listening on http://127.0.0.1:";
    while (std::fgets(line, sizeof line, log_) != nullptr) {
      output_ += line;
      const std::string_view text(line);
      if (const auto at = text.find(listening); at != std::string_view::npos) {
        port_ = std::atoi(line + at + listening.size());
        break;
      }
    }
    REQUIRE_MESSAGE(port_ > 0, output_);
    // Keep draining stderr so the server never blocks on a full pipe.
    drain_ = std::thread([this] {
      char rest[4096];
      while (std::fgets(rest, sizeof rest, log_) != nullptr) {
        std::lock_guard lock(output_mutex_);
        output_ += rest;
      }
    });
  }

  ~ServerProcess() {
    if (pid_ > 0 && !exited_) stop();
    if (drain_.joinable()) drain_.join();
    if (log_ != nullptr) std::fclose(log_);
  }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }

  // SIGTERM, then the exit status (-1 when it did not exit normally).
  int stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    exited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string output() {
    std::lock_guard lock(output_mutex_);
    return output_;
  }

  // The most memory the process has held so far (VmHWM), in MiB.
  double peak_mib() const {
    FILE* status = std::fopen(("/proc/" + std::to_string(pid_) + "/status").c_str(), "r");
    REQUIRE(status != nullptr);
    char line[256];
    double kib = -1;
    while (std::fgets(line, sizeof line, status) != nullptr) {
      if (std::string_view(line).starts_with("VmHWM:")) kib = std::atof(line + 6);
    }
    std::fclose(status);
    return kib / 1024;
  }

  // Waits (up to `seconds`) until the log holds `text`.
  bool wait_for_log(std::string_view text, double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      if (output().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool exited_ = false;
  FILE* log_ = nullptr;
  std::mutex output_mutex_;
  std::string output_;
  std::thread drain_;
};

std::string chat_body(const std::string& user, int max_tokens, bool stream = false) {
  return Json{{"messages", {{{"role", "user"}, {"content", user}}}},
              {"max_tokens", max_tokens},
              {"temperature", 0},
              {"stream", stream}}
      .dump();
}

// A reply that runs until the context is full: thousands of tokens, long enough for a
// test to act while it streams.
std::string endless_body() {
  return Json{{"messages", {{{"role", "user"}, {"content", "Tell me a long story"}}}},
              {"temperature", 0},
              {"ignore_eos", true},
              {"stream", true}}
      .dump();
}

// The status and error body a request gets.
struct Refusal {
  int status = 0;
  Json error;
};

Refusal post(httplib::Client& client, const std::string& path, const std::string& body,
             const httplib::Headers& headers = {}) {
  const auto res = client.Post(path, headers, body, "application/json");
  REQUIRE(res);
  Refusal refusal{res->status, Json()};
  if (res->status != 200) {
    refusal.error = Json::parse(res->body);
    CHECK(refusal.error["error"]["message"].is_string());
    CHECK(refusal.error["error"]["type"].is_string());
    CHECK(refusal.error["error"]["code"] == res->status);
  }
  return refusal;
}

// Reads metrics until `name` has `value` (they trail the events by a step), or 10 s.
double wait_for_metric(httplib::Client& client, const std::string& name, double value) {
  double seen = -1;
  for (int i = 0; i < 200; ++i) {
    const auto res = client.Get("/metrics");
    REQUIRE(res);
    const std::string key = "\n" + name + " ";
    if (const auto at = res->body.find(key); at != std::string::npos) {
      seen = std::stod(res->body.substr(at + key.size()));
    }
    if (seen == value) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return seen;
}

// POSTs `body` to the chat endpoint, handing each chunk of the answer to `receive`
// (false hangs up). httplib 0.11's Post has no receiver, so the Request is built here.
void post_streaming(httplib::Client& client, const std::string& body,
                    std::function<bool(const char*, std::size_t)> receive) {
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/chat/completions";
  request.body = body;
  request.set_header("Content-Type", "application/json");
  request.content_receiver = [receive](const char* data, std::size_t n, std::uint64_t,
                                       std::uint64_t) { return receive(data, n); };
  client.send(request);
}

// The SSE events of a streamed reply, read to the end.
std::vector<std::string> stream_events(httplib::Client& client, const std::string& body) {
  std::string data;
  post_streaming(client, body, [&](const char* chunk, std::size_t n) {
    data.append(chunk, n);
    return true;
  });
  std::vector<std::string> events;
  std::size_t at = 0;
  while ((at = data.find("data: ", at)) != std::string::npos) {
    const std::size_t end = data.find("\n\n", at);
    if (end == std::string::npos) break;
    events.push_back(data.substr(at + 6, end - at - 6));
    at = end + 2;
  }
  return events;
}

std::string streamed_content(const std::vector<std::string>& events) {
  std::string text;
  for (const std::string& e : events) {
    if (e == "[DONE]") continue;
    const Json chunk = Json::parse(e);
    if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
    const Json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) text += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) text += delta["content"].get<std::string>();
  }
  return text;
}

}  // namespace

TEST_CASE("bad requests get the right status and OpenAI's error body") {
  ServerProcess server({"-c", "1024", "--max-body", "4096", "--api-key", "sekrit"});
  httplib::Client client = server.client();
  const httplib::Headers key = {{"Authorization", "Bearer sekrit"}};

  CHECK(client.Get("/health")->status == 200);  // no key needed
  CHECK(client.Get("/")->status == 200);
  CHECK(post(client, "/v1/chat/completions", chat_body("Hi", 2)).status == 401);
  CHECK(
      post(client, "/v1/chat/completions", chat_body("Hi", 2), {{"Authorization", "Bearer wrong"}})
          .status == 401);
  CHECK(client.Get("/v1/models")->status == 401);
  CHECK(client.Get("/v1/models", key)->status == 200);

  CHECK(post(client, "/v1/nothing", "{}", key).status == 404);
  CHECK(post(client, "/v1/chat/completions", "{", key).status == 400);
  CHECK(post(client, "/v1/chat/completions",
             "{\"messages\": [{\"role\": \"user\", \"content\": \"\xc3\x28\"}]}", key)
            .status == 400);
  const Refusal big = post(client, "/v1/chat/completions", std::string(8192, ' '), key);
  CHECK(big.status == 413);
  const Refusal type =
      post(client, "/v1/chat/completions",
           R"({"messages": [{"role": "user", "content": "Hi"}], "temperature": "warm"})", key);
  CHECK(type.status == 400);
  CHECK(type.error["error"]["param"] == "temperature");
  // SmolLM3's template alone is about 530 tokens: this cannot fit 1024.
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word and ";
  const Refusal too_long = post(client, "/v1/chat/completions", chat_body(long_text, 2), key);
  CHECK(too_long.status == 400);
  CHECK(too_long.error["error"]["param"] == "messages");
  CHECK(std::string(too_long.error["error"]["message"]).find("prompt needs") != std::string::npos);
  CHECK(post(client, "/detokenize", R"({"tokens": [1, 99999999]})", key).status == 400);
  CHECK(post(client, "/tokenize", R"({"content": 5})", key).status == 400);

  // After all that, it still serves.
  CHECK(post(client, "/v1/chat/completions", chat_body("Hi", 2), key).status == 200);
  CHECK(server.stop() == 0);
}

// ---- hostile structure (the hardening issue) ------------------------------------------

// A chat request for one short reply, with `extra` fields ("name": value, ...).
std::string chat_with(const std::string& extra, int max_tokens = 8) {
  return R"({"messages": [{"role": "user", "content": "Hi"}], "temperature": 0, "max_tokens": )" +
         std::to_string(max_tokens) + ", " + extra + "}";
}

using smol::test::nested;

// The error message of a refusal.
std::string message_of(const Refusal& refusal) {
  return refusal.error.is_null() ? "" : refusal.error["error"]["message"].get<std::string>();
}

// Nested counted repetition: billions of ways to read "aaa" (grammar_limits.hpp).
const std::string kNestedRepetition = R"(root ::= (("a"{0,2000}){0,2000}){0,2000})";

TEST_CASE("hostile structure: deep JSON and schemas, nested repetition, 5,000 properties") {
  // A step budget of a quarter of the default keeps the refusals quick under the
  // sanitizers; the default's own refusal is test_grammar's.
  ServerProcess server({"-c", "4096", "--grammar-work", "1000000"});
  httplib::Client client = server.client();
  const double start_mib = server.peak_mib();
  struct Case {
    const char* what;
    std::string body;
    std::string param, says;
  };
  const std::string deep_schema =
      nested(10'000, R"({"type": "object", "properties": {"a": )", "{}", "}}");
  const std::string schema_100 =
      nested(100, R"({"type": "object", "properties": {"a": )", "{}", "}}");
  const std::vector<Case> cases = {
      {"a schema 10,000 objects deep", chat_with(R"("json_schema": )" + deep_schema), "",
       "nests more than 256 levels deep (at byte"},
      {"anyOf 20,000 deep",
       chat_with(R"("json_schema": )" + nested(20'000, R"({"anyOf": [)", "{}", "]}")), "",
       "nests more than 256"},
      {"arrays 8,000 deep",
       chat_with(R"("json_schema": )" + nested(8'000, R"({"type": "array", "items": )", "{}", "}")),
       "", "nests more than 256"},
      {"a schema 100 objects deep", chat_with(R"("json_schema": )" + schema_100), "json_schema",
       "subschemas nested more than 64 levels deep (at #/properties/a/properties/a"},
      {"a tool's parameters 100 deep",
       chat_with(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": )" +
                 schema_100 + "}}]"),
       "tools[0].function.parameters", "nested more than 64 levels"},
      {"nested repetition", chat_with(R"("grammar": )" + Json(kNestedRepetition).dump()), "grammar",
       "too ambiguous to follow: one step needs more than 1000000 expansions"},
      {"the same in a pattern",
       chat_with(
           R"("json_schema": {"type": "string", "pattern": "^((a{0,2000}){0,2000}){0,2000}$"})"),
       "json_schema", "too ambiguous to follow"},
      {"a pattern of optional groups",
       chat_with(R"("json_schema": {"type": "string", "pattern": "^((a?){0,2000}){0,2000}$"})"),
       "json_schema", "too ambiguous to follow"},
      {"a grammar no token can begin", chat_with(R"("grammar": "root ::= [\\uD800-\\uDFFF]+")"),
       "grammar", "no token of the model's vocabulary can begin a text it accepts"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const auto started = std::chrono::steady_clock::now();
    const Refusal refusal = post(client, "/v1/chat/completions", c.body);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    CAPTURE(message_of(refusal));
    CHECK(refusal.status == 400);
    CHECK(refusal.error["error"]["param"] == (c.param.empty() ? Json(nullptr) : Json(c.param)));
    CHECK(message_of(refusal).find(c.says) != std::string::npos);
    CHECK(seconds < 30);  // a hang detector, not a timing: each is a budget's work
  }
  // 5,000 optional properties beside additionalProperties: linear rules, a reply.
  std::string properties;
  for (int i = 0; i < 5000; ++i) {
    properties +=
        (i ? ", " : "") + std::string("\"p") + std::to_string(i) + R"(": {"type": "integer"})";
  }
  const auto many = client.Post(
      "/v1/chat/completions",
      chat_with(R"("response_format": {"type": "json_schema", "json_schema": {"schema": )"
                R"({"type": "object", "properties": {)" +
                properties + R"(}, "additionalProperties": {"type": "string"}}}})"),
      "application/json");
  REQUIRE(many);
  CHECK(many->status == 200);
  // A grammar that dead-ends after "a": the reply says so, it is not the model's stop.
  const auto dead_end = client.Post("/v1/chat/completions",
                                    chat_with(R"("grammar": "root ::= \"a\" [\\uD800-\\uDFFF]")"),
                                    "application/json");
  REQUIRE(dead_end);
  REQUIRE(dead_end->status == 200);
  const Json reply = Json::parse(dead_end->body);
  CHECK(reply["choices"][0]["finish_reason"] == "grammar_dead_end");
  CHECK(reply["choices"][0]["message"]["content"] == "a");
  // It lives on, and its memory stayed bounded: the budgets' work, not the grammars'
  // (nested repetition alone would take gigabytes).
  CHECK(post(client, "/v1/chat/completions", chat_body("Hi", 2)).status == 200);
  const double grown = server.peak_mib() - start_mib;
  MESSAGE("peak memory grew by " << grown << " MiB");
  CHECK(grown < 1024);
  CHECK(server.stop() == 0);
}

TEST_CASE("a grammar compiling holds nothing: others are served; a hang-up or SIGTERM ends it") {
  // Budgets lifted, so that the nested repetition compiles for minutes unless stopped.
  ServerProcess server({"-c", "4096", "--grace", "2", "--grammar-work", "1000000000000",
                        "--grammar-memory", "2048", "--grammar-timeout", "3600"});
  const std::string heavy = chat_with(R"("grammar": )" + Json(kNestedRepetition).dump());
  // A client that gives up after 300 ms: its compilation ends when it hangs up.
  {
    httplib::Client impatient = server.client();
    impatient.set_read_timeout(0, 300'000);
    const auto started = std::chrono::steady_clock::now();
    CHECK_FALSE(impatient.Post("/v1/chat/completions", heavy, "application/json"));
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  }
  CHECK(server.wait_for_log("a grammar's compilation stopped: its client went away", 30));
  // While another compiles, a plain request and one with a small schema are served.
  std::atomic<bool> heavy_done{false};
  int heavy_status = 0;
  std::thread compiling([&] {
    httplib::Client patient = server.client();
    patient.set_read_timeout(600, 0);
    const auto res = patient.Post("/v1/chat/completions", heavy, "application/json");
    heavy_status = res ? res->status : -1;
    heavy_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  httplib::Client client = server.client();
  CHECK(post(client, "/v1/chat/completions", chat_body("Hi", 2)).status == 200);
  CHECK(post(client, "/v1/chat/completions", chat_with(R"("json_schema": {"type": "integer"})"))
            .status == 200);
  CHECK_FALSE(heavy_done);
  // SIGTERM with the compilation in flight: it stops, and the server exits within its
  // grace (2 s), not when the compilation would have ended.
  const auto started = std::chrono::steady_clock::now();
  CHECK(server.stop() == 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  compiling.join();
  CHECK(heavy_status == 503);
  CHECK(seconds < 15);  // the grace and a margin: a hang detector
}

TEST_CASE("a client that leaves before a reply in one piece is ready frees its slot at once") {
  ServerProcess server({"-c", "4096"});
  {
    httplib::Client impatient = server.client();
    impatient.set_read_timeout(0, 300'000);
    CHECK_FALSE(impatient.Post("/v1/chat/completions",
                               Json{{"messages", {{{"role", "user"}, {"content", "Tell me"}}}},
                                    {"temperature", 0},
                                    {"ignore_eos", true}}
                                   .dump(),
                               "application/json"));
  }
  // Tokens flow all the while, so the hang-up is noticed between them, not in a pause.
  httplib::Client client = server.client();
  CHECK(wait_for_metric(client, "smol_requests_cancelled_total", 1) == 1);
  CHECK(server.stop() == 0);
}

TEST_CASE("a JSON body sent as a form (curl -d's default type) is read as JSON, past 8 KiB too") {
  ServerProcess server({"-c", "1024"});
  httplib::Client client = server.client();
  std::string body = chat_body("Hi", 2);
  body.insert(body.size() - 1, std::string(9000, ' '));  // JSON white space: > 8 KiB
  for (const char* type : {"application/x-www-form-urlencoded", "text/plain"}) {
    CAPTURE(type);
    const auto res = client.Post("/v1/chat/completions", body, type);
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(Json::parse(res->body)["object"] == "chat.completion");
  }
  const auto tokens =
      client.Post("/tokenize", R"({"content": "Hi"})", "application/x-www-form-urlencoded");
  REQUIRE(tokens);
  CHECK(tokens->status == 200);
  CHECK(server.stop() == 0);
}

TEST_CASE("past the queue limit 503; a client that leaves frees its slot for the next") {
  ServerProcess server({"-c", "4096", "-np", "1", "--queue-limit", "1"});
  httplib::Client control = server.client();

  // A long reply holds the one slot; its client hangs up when told.
  std::atomic<bool> streaming{false}, hang_up{false};
  std::thread holder([&] {
    httplib::Client client = server.client();
    std::size_t chunks = 0;
    post_streaming(client, endless_body(), [&](const char*, std::size_t) {
      if (++chunks == 3) streaming = true;
      return !hang_up.load();
    });
  });
  while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(wait_for_metric(control, "smol_slots_busy", 1) == 1);

  // The next one waits in the queue...
  std::atomic<int> queued_status{0};
  std::thread queued([&] {
    httplib::Client client = server.client();
    const auto res = client.Post("/v1/chat/completions", chat_body("Hi", 4), "application/json");
    queued_status = res ? res->status : -1;
  });
  CHECK(wait_for_metric(control, "smol_queue_depth", 1) == 1);
  // ... and the one after that finds the queue full.
  const auto refused = control.Post("/v1/chat/completions", chat_body("Hi", 2), "application/json");
  REQUIRE(refused);
  CHECK(refused->status == 503);
  CHECK(refused->get_header_value("Retry-After") == "1");
  CHECK(Json::parse(refused->body)["error"]["type"] == "unavailable_error");
  CHECK(wait_for_metric(control, "smol_requests_rejected_total", 1) == 1);
  CHECK(queued_status == 0);  // still waiting: the slot is taken

  // The streaming client leaves: its request is cancelled and the queued one runs.
  hang_up = true;
  holder.join();
  queued.join();
  CHECK(queued_status == 200);
  CHECK(wait_for_metric(control, "smol_requests_cancelled_total", 1) == 1);
  CHECK(wait_for_metric(control, "smol_slots_busy", 0) == 0);
  CHECK(wait_for_metric(control, "smol_queue_depth", 0) == 0);
}

TEST_CASE("eight replies streamed side by side equal the same requests served one at a time") {
  ServerProcess server({"-c", "2048", "-np", "8"});
  const std::vector<std::string> prompts = {
      "Once upon a time", "Why is the sky blue?", "List three fruits", "Hello there",
      "Write a haiku",    "What is 2+2?",         "Name a color",      "Tell me a joke"};
  std::vector<std::string> alone;
  for (const std::string& p : prompts) {
    httplib::Client client = server.client();
    const auto res = client.Post("/v1/chat/completions", chat_body(p, 12 + int(alone.size())),
                                 "application/json");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    const Json reply = Json::parse(res->body);
    const Json& message = reply["choices"][0]["message"];
    alone.push_back(message.value("reasoning_content", "") + message["content"].get<std::string>());
  }
  std::vector<std::string> together(prompts.size());
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      httplib::Client client = server.client();
      together[i] = streamed_content(
          stream_events(client, chat_body(prompts[i], 12 + static_cast<int>(i), true)));
    });
  }
  for (auto& c : clients) c.join();
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    CAPTURE(i);
    CHECK(together[i] == alone[i]);
  }
}

TEST_CASE("a conversation's next turn reuses the cached prefix") {
  ServerProcess server({"-c", "2048", "-np", "2"});
  httplib::Client client = server.client();
  Json request = {{"messages", {{{"role", "user"}, {"content", "Hi, who are you?"}}}},
                  {"max_tokens", 6},
                  {"temperature", 0}};
  const auto first = client.Post("/v1/chat/completions", request.dump(), "application/json");
  REQUIRE(first);
  const Json one = Json::parse(first->body);
  request["messages"].push_back(one["choices"][0]["message"]);
  request["messages"].push_back({{"role", "user"}, {"content", "And then?"}});
  const auto second = client.Post("/v1/chat/completions", request.dump(), "application/json");
  REQUIRE(second);
  const Json two = Json::parse(second->body);
  const int cached = two["usage"]["prompt_tokens_details"]["cached_tokens"];
  // At least the system prompt and the first user turn.
  CHECK(cached >= one["usage"]["prompt_tokens"].get<int>() - 2);
  CHECK(cached < two["usage"]["prompt_tokens"].get<int>());
  CHECK(two["timings"]["cache_n"] == cached);
}

TEST_CASE(
    "--context-shift: a conversation of three contexts loses its oldest turns; without, 400") {
  // Twelve turns of about 60 tokens each, in a context of 512: about three contexts.
  Json messages = Json::array({{{"role", "system"}, {"content", "You are a test."}}});
  for (int turn = 0; turn < 12; ++turn) {
    std::string text = "Turn " + std::to_string(turn) + ":";
    for (int word = 0; word < 30; ++word) text += " word" + std::to_string(word);
    messages.push_back({{"role", "user"}, {"content", text}});
    messages.push_back({{"role", "assistant"}, {"content", "Reply " + std::to_string(turn) + "."}});
  }
  messages.push_back({{"role", "user"}, {"content", "The last question."}});
  const Json request = {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}};
  {
    ServerProcess plain({"-c", "512", "-np", "1"});
    httplib::Client client = plain.client();
    const Refusal refused = post(client, "/v1/chat/completions", request.dump());
    CHECK(refused.status == 400);
    CHECK(refused.error["error"]["message"].get<std::string>().find("512") != std::string::npos);
  }
  ServerProcess server({"-c", "512", "-np", "1", "--context-shift"});
  httplib::Client client = server.client();
  const auto res = client.Post("/v1/chat/completions", request.dump(), "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  const Json reply = Json::parse(res->body);
  const Json& shift = reply["timings"]["context_shift"];
  const std::size_t dropped = shift["dropped_messages"];
  CHECK(dropped > 0);
  CHECK(dropped % 2 == 0);  // whole turns: a user message and its reply
  CHECK(res->get_header_value("X-Context-Shift") ==
        "dropped_messages=" + std::to_string(dropped) +
            "; dropped_tokens=" + std::to_string(shift["dropped_tokens"].get<std::size_t>()));
  // Which turns went: the prompt read is exactly the system prompt and the turns after
  // the dropped ones, as the template renders them.
  Json kept = Json::array({messages[0]});
  for (std::size_t i = 1 + dropped; i < messages.size(); ++i) kept.push_back(messages[i]);
  const auto rendered =
      client.Post("/apply-template", Json{{"messages", kept}}.dump(), "application/json");
  REQUIRE(rendered);
  const auto tokens = client.Post(
      "/tokenize",
      Json{{"content", Json::parse(rendered->body)["prompt"]}, {"parse_special", true}}.dump(),
      "application/json");
  REQUIRE(tokens);
  const std::size_t prompt = Json::parse(tokens->body)["tokens"].size();
  CHECK(reply["usage"]["prompt_tokens"] == prompt);
  CHECK(prompt <= 512 - 8);
  // One turn fewer would not have left the reply its room.
  Json one_more = Json::array({messages[0]});
  for (std::size_t i = 1 + dropped - 2; i < messages.size(); ++i) one_more.push_back(messages[i]);
  const auto longer =
      client.Post("/apply-template", Json{{"messages", one_more}}.dump(), "application/json");
  const auto longer_tokens = client.Post(
      "/tokenize",
      Json{{"content", Json::parse(longer->body)["prompt"]}, {"parse_special", true}}.dump(),
      "application/json");
  CHECK(Json::parse(longer_tokens->body)["tokens"].size() > 512 - 8);
  CHECK(server.wait_for_log("context shift: dropped the oldest", 5));
  // Streamed, the last chunk's timings say the same.
  Json streamed = request;
  streamed["stream"] = true;
  bool said = false;
  for (const std::string& event : stream_events(client, streamed.dump())) {
    if (event == "[DONE]") continue;
    const Json chunk = Json::parse(event);
    if (chunk.contains("timings")) said = chunk["timings"]["context_shift"] == shift;
  }
  CHECK(said);
  // A last turn that alone is over the context is still refused.
  const Json huge = {{"messages", {{{"role", "user"}, {"content", std::string(6000, 'x')}}}},
                     {"max_tokens", 8}};
  CHECK(post(client, "/v1/chat/completions", huge.dump()).status == 400);
}

TEST_CASE(
    "--cache-ram: of eight alternating conversations in a pool of three pages, one returns from "
    "RAM") {
  // A pool of 768 positions (-np 1 -c 768, three pages) and conversations of 257 to 512
  // tokens (two pages; ChatML's template, whose system block is short): a new one evicts
  // the one before from the pool.
  std::vector<Json> conversations;
  for (int c = 0; c < 8; ++c) {
    std::string text = "Conversation " + std::to_string(c) + ":";
    for (int word = 0; word < 50; ++word)
      text += " talk" + std::to_string(c) + "x" + std::to_string(word);
    conversations.push_back({{{"role", "user"}, {"content", text}}});
  }
  const auto ask = [](httplib::Client& client, const Json& messages) {
    const auto res =
        client.Post("/v1/chat/completions",
                    Json{{"messages", messages}, {"max_tokens", 4}, {"temperature", 0}}.dump(),
                    "application/json");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    return Json::parse(res->body);
  };
  for (const bool host : {false, true}) {
    CAPTURE(host);
    std::vector<std::string> args = {"-c", "768", "-np", "1", "--chat-template", "chatml"};
    if (host) args.insert(args.end(), {"--cache-ram", "64"});
    ServerProcess server(args);
    httplib::Client client = server.client();
    std::vector<Json> replies;
    for (const Json& messages : conversations) replies.push_back(ask(client, messages));
    const std::size_t first_prompt = replies[0]["usage"]["prompt_tokens"];
    REQUIRE(first_prompt > 256);
    REQUIRE(first_prompt <= 500);
    // The first conversation's next turn, after seven others took the pool.
    Json next = conversations[0];
    next.push_back(
        {{"role", "assistant"}, {"content", replies[0]["choices"][0]["message"]["content"]}});
    next.push_back({{"role", "user"}, {"content", "And then?"}});
    const Json back = ask(client, next);
    const std::size_t cached = back["usage"]["prompt_tokens_details"]["cached_tokens"];
    if (host) {
      CHECK(cached >= first_prompt);  // the prompt and the reply, from RAM
    } else {
      CHECK(cached < 32);  // at most the template's opening, shared by all
    }
  }
}

TEST_CASE("/slots: save a conversation, restart, restore; the next turn reads it from the file") {
  const std::filesystem::path dir = smol::test::scratch_dir() / "slots";
  std::filesystem::create_directories(dir);
  const Json first = {{"messages", {{{"role", "user"}, {"content", "Remember the number 42."}}}},
                      {"max_tokens", 4},
                      {"temperature", 0}};
  std::string reply_text;
  std::size_t saved = 0;
  {
    ServerProcess server({"-c", "2048", "-np", "1", "--slot-save-path", dir.string()});
    httplib::Client client = server.client();
    const auto res = client.Post("/v1/chat/completions", first.dump(), "application/json");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    reply_text = Json::parse(res->body)["choices"][0]["message"]["content"];
    const auto slots = client.Get("/slots");
    REQUIRE(slots);
    const Json list = Json::parse(slots->body);
    REQUIRE(list.size() == 1);
    const auto save =
        client.Post("/slots/0?action=save", R"({"filename": "chat.bin"})", "application/json");
    REQUIRE(save);
    REQUIRE(save->status == 200);
    const Json said = Json::parse(save->body);
    saved = said["n_saved"];
    CHECK(saved == list[0]["n_tokens"]);
    CHECK(said["n_written"] == std::filesystem::file_size(dir / "chat.bin"));
    // Refusals: a path, a slot that holds nothing, an unknown action.
    CHECK(post(client, "/slots/0?action=save", R"({"filename": "../x.bin"})").status == 400);
    CHECK(post(client, "/slots/5?action=save", R"({"filename": "x.bin"})").status == 400);
    CHECK(post(client, "/slots/0?action=move", "{}").status == 400);
    CHECK(server.stop() == 0);
  }
  ServerProcess server({"-c", "2048", "-np", "1", "--slot-save-path", dir.string()});
  httplib::Client client = server.client();
  CHECK(post(client, "/slots/0?action=restore", R"({"filename": "missing.bin"})").status == 404);
  const auto restore =
      client.Post("/slots/0?action=restore", R"({"filename": "chat.bin"})", "application/json");
  REQUIRE(restore);
  REQUIRE(restore->status == 200);
  CHECK(Json::parse(restore->body)["n_restored"] == saved);
  // The next turn starts with the restored tokens: all of them are read from the file's K/V.
  Json next = first;
  next["messages"].push_back({{"role", "assistant"}, {"content", reply_text}});
  next["messages"].push_back({{"role", "user"}, {"content", "Which number?"}});
  const auto res = client.Post("/v1/chat/completions", next.dump(), "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  CHECK(Json::parse(res->body)["usage"]["prompt_tokens_details"]["cached_tokens"] == saved);
  // Erased, the slot is gone.
  const auto slots = Json::parse(client.Get("/slots")->body);
  const std::size_t cached = slots.size();
  const auto erase = client.Post("/slots/0?action=erase", "", "application/json");
  REQUIRE(erase);
  CHECK(erase->status == 200);
  CHECK(Json::parse(client.Get("/slots")->body).size() == cached - 1);
  // A file of another model is refused, by name; without --slot-save-path, 501.
  std::filesystem::copy_file(dir / "chat.bin", dir / "other.bin");
  {
    std::fstream other(dir / "other.bin", std::ios::in | std::ios::out | std::ios::binary);
    other.seekp(8 + 4 + 4);  // the magic, the version, the architecture name's length
    other.put('X');
  }
  const Refusal other = post(client, "/slots/0?action=restore", R"({"filename": "other.bin"})");
  CHECK(other.status == 400);
  CHECK(other.error["error"]["message"].get<std::string>().find("another model") !=
        std::string::npos);
  ServerProcess plain({"-c", "512", "-np", "1"});
  httplib::Client plain_client = plain.client();
  CHECK(post(plain_client, "/slots/0?action=save", R"({"filename": "x.bin"})").status == 501);
}

TEST_CASE("SIGTERM: a reply still running after the grace period is ended; exit 0") {
  ServerProcess server({"-c", "4096", "--grace", "0"});
  std::atomic<bool> streaming{false};
  std::vector<std::string> events;
  std::thread reader([&] {
    httplib::Client client = server.client();
    const std::string body = endless_body();
    std::string data;
    post_streaming(client, body, [&](const char* chunk, std::size_t n) {
      data.append(chunk, n);
      streaming = true;
      return true;
    });
    events.push_back(data);
  });
  while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto started = std::chrono::steady_clock::now();
  CHECK(server.stop() == 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  reader.join();
  REQUIRE(events.size() == 1);
  // The stream was told why it ended, then closed properly.
  CHECK(events[0].find("server stopped") != std::string::npos);
  CHECK(events[0].find("data: [DONE]") != std::string::npos);
  CHECK(seconds < 10);
  CHECK(server.output().find("cancelling 1 replies") != std::string::npos);
}

// cpp-httplib's worker would wait out its keep-alive timeout on a client's idle connection
// before the server could exit (examples/server/main.cpp, end_idle_connections).
TEST_CASE("SIGTERM: an idle keep-alive connection is closed, not waited out; exit 0") {
  ServerProcess server({"-c", "4096"});
  httplib::Client client = server.client();
  client.set_keep_alive(true);
  const auto reply = client.Post("/v1/chat/completions", chat_body("Hi", 2), "application/json");
  REQUIRE(reply);
  CHECK(reply->status == 200);
  // The worker goes back to wait on the connection once the response is written; were the
  // server stopped before that, httplib would close the connection itself (no wait either,
  // but nothing for this test to see).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(server.stop() == 0);
  CHECK_MESSAGE(server.wait_for_log("closing 1 idle connection", 10), server.output());
}

TEST_CASE("SIGTERM: a reply in flight may finish within the grace period; exit 0") {
  ServerProcess server({"-c", "4096", "--grace", "60"});
  std::atomic<bool> streaming{false};
  std::string data;
  std::thread reader([&] {
    httplib::Client client = server.client();
    post_streaming(client, chat_body("Tell me a story", 300, true),
                   [&](const char* chunk, std::size_t n) {
                     data.append(chunk, n);
                     streaming = true;
                     return true;
                   });
  });
  while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(server.stop() == 0);
  reader.join();
  CHECK(data.find("\"finish_reason\":\"") != std::string::npos);
  CHECK(data.find("server stopped") == std::string::npos);
  CHECK(data.find("data: [DONE]") != std::string::npos);
}

namespace {

// Whether two chat logprobs lists agree: the same tokens, and logprobs equal but for the
// rounding a prompt's last row may take when read from the prompt cache rather than in a
// prefill (the order of near-tied top tokens may then swap: their values are compared).
void check_same_logprobs(const Json& a, const Json& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(a[i]["bytes"] == b[i]["bytes"]);
    CHECK(a[i]["logprob"].get<double>() ==
          doctest::Approx(b[i]["logprob"].get<double>()).epsilon(1e-3));
    REQUIRE(a[i]["top_logprobs"].size() == b[i]["top_logprobs"].size());
    for (std::size_t k = 0; k < a[i]["top_logprobs"].size(); ++k) {
      CHECK(a[i]["top_logprobs"][k]["logprob"].get<double>() ==
            doctest::Approx(b[i]["top_logprobs"][k]["logprob"].get<double>()).epsilon(1e-3));
    }
  }
}

std::string logprobs_body(const std::string& user, int max_tokens, bool stream) {
  return Json{{"messages", {{{"role", "user"}, {"content", user}}}},
              {"max_tokens", max_tokens},
              {"temperature", 0.7},
              {"seed", 3},
              {"ignore_eos", true},
              {"logprobs", true},
              {"top_logprobs", 3},
              {"stream", stream}}
      .dump();
}

}  // namespace

TEST_CASE("logprobs: streamed side by side equal those of replies served alone, both endpoints") {
  ServerProcess server({"-c", "1024", "-np", "4"});
  const std::vector<std::string> prompts = {"Once upon a time", "Why is the sky blue?",
                                            "List three fruits", "Hello there"};
  std::vector<Json> alone;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    httplib::Client client = server.client();
    const int n = 6 + static_cast<int>(i);
    const auto res = client.Post("/v1/chat/completions", logprobs_body(prompts[i], n, false),
                                 "application/json");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    const Json reply = Json::parse(res->body);
    const Json& logprobs = reply["choices"][0]["logprobs"];
    CHECK(logprobs["refusal"].is_null());
    REQUIRE(logprobs["content"].size() == static_cast<std::size_t>(n));  // ignore_eos: all count
    for (const Json& entry : logprobs["content"]) {
      CHECK(entry["logprob"].get<double>() <= 0.0);
      REQUIRE(entry["top_logprobs"].size() == 3);
      double mass = 0.0;
      for (const Json& t : entry["top_logprobs"]) mass += std::exp(t["logprob"].get<double>());
      CHECK(mass <= 1.0 + 1e-5);
    }
    alone.push_back(logprobs["content"]);
  }
  std::vector<Json> together(prompts.size(), Json::array());
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      httplib::Client client = server.client();
      const auto events =
          stream_events(client, logprobs_body(prompts[i], 6 + static_cast<int>(i), true));
      for (const std::string& e : events) {
        if (e == "[DONE]") continue;
        const Json chunk = Json::parse(e);
        if (chunk["choices"].empty()) continue;
        const Json& logprobs = chunk["choices"][0]["logprobs"];
        if (logprobs.is_null()) continue;
        for (const Json& entry : logprobs["content"]) together[i].push_back(entry);
      }
    });
  }
  for (auto& c : clients) c.join();
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    CAPTURE(i);
    check_same_logprobs(together[i], alone[i]);
  }

  // The legacy endpoint: parallel lists, text offsets into the reply's text.
  httplib::Client client = server.client();
  const std::string legacy = Json{
      {"prompt", "Once upon a time"},
      {"max_tokens", 5},
      {"temperature", 0},
      {"logprobs", 2}}.dump();
  const auto res = client.Post("/v1/completions", legacy, "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  const Json choice = Json::parse(res->body)["choices"][0];
  const Json& lp = choice["logprobs"];
  // Without ignore_eos a greedy token is the raw row's best; an end-of-turn token ends the
  // reply unreported.
  const std::size_t n = lp["tokens"].size();
  REQUIRE(n >= 1);
  REQUIRE(n <= 5);
  REQUIRE(lp["token_logprobs"].size() == n);
  REQUIRE(lp["top_logprobs"].size() == n);
  REQUIRE(lp["text_offset"].size() == n);
  std::size_t offset = 0;
  for (std::size_t k = 0; k < n; ++k) {
    CHECK(lp["text_offset"][k] == offset);
    offset += lp["tokens"][k].get<std::string>().size();
    CHECK(lp["top_logprobs"][k].size() <= 2);
    // Greedy: the chosen token is the most likely one.
    double best = -1e9;
    for (const auto& [token, value] : lp["top_logprobs"][k].items()) {
      best = std::max(best, value.get<double>());
    }
    CHECK(lp["token_logprobs"][k].get<double>() == doctest::Approx(best));
  }
  const Refusal refused =
      post(client, "/v1/chat/completions",
           Json{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"top_logprobs", 2}}.dump());
  CHECK(refused.status == 400);
  CHECK(refused.error["error"]["param"] == "top_logprobs");
}

TEST_CASE("n choices: sampled each with its own seed from one prompt read once, both endpoints") {
  ServerProcess server({"-c", "1024", "-np", "4"});
  httplib::Client client = server.client();
  const auto chat = [&](Json fields) {
    Json body = {{"messages", {{{"role", "user"}, {"content", "Pick a number, any number"}}}},
                 {"max_tokens", 8},
                 {"ignore_eos", true}};
    body.update(fields);
    const auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
    REQUIRE(res);
    REQUIRE_MESSAGE(res->status == 200, res->body);
    return Json::parse(res->body);
  };
  const auto content = [](const Json& reply, std::size_t i) {
    return reply["choices"][i]["message"]["content"].get<std::string>();
  };

  const Json three = chat({{"n", 3}, {"temperature", 1.0}, {"seed", 5}, {"logprobs", true}});
  REQUIRE(three["choices"].size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(three["choices"][i]["index"] == i);
    CHECK(three["choices"][i]["logprobs"]["content"].size() == 8);
  }
  CHECK(three["usage"]["completion_tokens"] == 24);
  // The prompt is read once: the other two choices fork it and evaluate its last token.
  const int prompt = three["usage"]["prompt_tokens"];
  CHECK(three["timings"]["prompt_n"] == prompt + 2);
  CHECK(three["timings"]["cache_n"] == 2 * (prompt - 1));
  CHECK(content(three, 0) != content(three, 1));
  CHECK(content(three, 1) != content(three, 2));
  // Choice i samples with seed + i: alone with seed 6, choice 1's reply.
  CHECK(content(chat({{"temperature", 1.0}, {"seed", 6}}), 0) == content(three, 1));

  const Json greedy = chat({{"n", 2}, {"temperature", 0}});
  REQUIRE(greedy["choices"].size() == 2);
  CHECK(content(greedy, 0) == content(greedy, 1));

  // Structured output holds in every choice.
  const Json yes_no =
      chat({{"n", 2},
            {"temperature", 1.0},
            {"response_format",
             {{"type", "json_schema"},
              {"json_schema", {{"name", "a"}, {"schema", {{"enum", {"yes", "no"}}}}}}}}});
  for (std::size_t i = 0; i < 2; ++i) {
    const Json parsed = Json::parse(content(yes_no, i));
    CHECK((parsed == "yes" || parsed == "no"));
  }

  // Streamed: the chunks carry their choice's index; put together per index, the
  // non-streamed replies; one usage chunk summing both.
  const std::string streamed = Json{
      {"messages", {{{"role", "user"}, {"content", "Pick a number, any number"}}}},
      {"max_tokens", 8},
      {"ignore_eos", true},
      {"n", 3},
      {"temperature", 1.0},
      {"seed", 5},
      {"stream", true},
      {"stream_options",
       {{"include_usage", true}}}}.dump();
  std::vector<std::string> texts(3);
  std::vector<int> finishes(3, 0);
  int usage_chunks = 0;
  for (const std::string& e : stream_events(client, streamed)) {
    if (e == "[DONE]") continue;
    const Json chunk = Json::parse(e);
    if (chunk["choices"].empty()) {
      ++usage_chunks;
      CHECK(chunk["usage"]["completion_tokens"] == 24);
      continue;
    }
    const std::size_t i = chunk["choices"][0]["index"];
    REQUIRE(i < 3);
    texts[i] += chunk["choices"][0]["delta"].value("content", "");
    if (!chunk["choices"][0]["finish_reason"].is_null()) ++finishes[i];
  }
  CHECK(usage_chunks == 1);
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(finishes[i] == 1);
    CHECK(texts[i] == content(three, i));
  }

  const Json body = {{"prompt", "Once upon a time"},
                     {"max_tokens", 4},
                     {"ignore_eos", true},
                     {"n", 2},
                     {"temperature", 0},
                     {"logprobs", 1}};
  const auto res = client.Post("/v1/completions", body.dump(), "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  const Json completion = Json::parse(res->body);
  REQUIRE(completion["choices"].size() == 2);
  CHECK(completion["choices"][1]["index"] == 1);
  CHECK(completion["choices"][0]["text"] == completion["choices"][1]["text"]);
  CHECK(completion["choices"][1]["logprobs"]["tokens"].size() == 4);
  CHECK(completion["usage"]["completion_tokens"] == 8);

  for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
    CAPTURE(path);
    const Refusal refused =
        post(client, path,
             Json{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"prompt", "x"}, {"n", 17}}
                 .dump());
    CHECK(refused.status == 400);
    CHECK(refused.error["error"]["param"] == "n");
  }
}

TEST_CASE("a template with Hermes-style tools: calls forced, read back, streamed alike") {
  // The fixture with Qwen2.5's template in place of its own.
  const smol::gguf::GgufFile original = smol::gguf::GgufFile::open(kFixture);
  smol::gguf::GgufWriter writer = smol::gguf::GgufWriter::copy_of(original);
  std::string qwen(smol::kQwen25Template);
  for (std::size_t at; (at = qwen.find(smol::kDefaultSystemHole)) != std::string::npos;) {
    qwen.replace(at, smol::kDefaultSystemHole.size(), "You are a test.");
  }
  writer.set("tokenizer.chat_template", qwen);
  const std::string model = (smol::test::scratch_dir() / "qwen-template.gguf").string();
  writer.write(model);
  ServerProcess server({"-c", "1024", "-np", "2"}, model);
  CHECK(server.output().find("not one smol knows") == std::string::npos);
  httplib::Client client = server.client();
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
                     "required": ["city"], "additionalProperties": false}}}])");
  for (const int seed : {1, 2, 3}) {
    CAPTURE(seed);
    Json body = {{"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
                 {"tools", tools},
                 {"tool_choice", "required"},
                 {"parallel_tool_calls", false},
                 {"temperature", 1.0},
                 {"seed", seed},
                 {"max_tokens", 200}};
    const auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
    REQUIRE(res);
    REQUIRE_MESSAGE(res->status == 200, res->body);
    const Json choice = Json::parse(res->body)["choices"][0];
    CHECK(choice["finish_reason"] == "tool_calls");
    REQUIRE(choice["message"]["tool_calls"].size() == 1);
    const Json call = choice["message"]["tool_calls"][0];
    CHECK(call["function"]["name"] == "get_weather");
    const Json arguments = Json::parse(call["function"]["arguments"].get<std::string>());
    REQUIRE(arguments.is_object());
    CHECK(arguments.size() == 1);
    CHECK(arguments["city"].get<std::string>().size() <= 12 * 4);  // <= 12 characters
    CHECK(choice["message"]["content"].is_null());

    body["stream"] = true;
    std::string name, streamed;
    for (const std::string& e : stream_events(client, body.dump())) {
      if (e == "[DONE]") continue;
      const Json chunk = Json::parse(e);
      if (chunk["choices"].empty()) continue;
      const Json& delta = chunk["choices"][0]["delta"];
      if (!delta.contains("tool_calls")) continue;
      const Json& f = delta["tool_calls"][0]["function"];
      if (f.contains("name")) name += f["name"].get<std::string>();
      streamed += f.value("arguments", "");
    }
    CHECK(name == "get_weather");
    CHECK(streamed == call["function"]["arguments"]);
  }
}

TEST_CASE(
    "post_sampling_probs: probabilities after the sampler, llama-server's prob and top_probs") {
  ServerProcess server({"-c", "1024", "-np", "1"});
  httplib::Client client = server.client();
  Json body = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
               {"max_tokens", 6},
               {"ignore_eos", true},
               {"temperature", 0.7},
               {"top_k", 3},
               {"seed", 9},
               {"logprobs", true},
               {"top_logprobs", 5}};
  const auto raw = client.Post("/v1/chat/completions", body.dump(), "application/json");
  body["post_sampling_probs"] = true;
  const auto post = client.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(raw);
  REQUIRE(post);
  REQUIRE(raw->status == 200);
  REQUIRE(post->status == 200);
  const Json a = Json::parse(raw->body)["choices"][0], b = Json::parse(post->body)["choices"][0];
  CHECK(a["message"]["content"] == b["message"]["content"]);  // the same tokens drawn
  REQUIRE(b["logprobs"]["content"].size() == 6);
  for (const Json& entry : b["logprobs"]["content"]) {
    CHECK_FALSE(entry.contains("logprob"));
    CHECK_FALSE(entry.contains("top_logprobs"));
    const double chosen = entry["prob"];
    CHECK(chosen > 0.0);
    CHECK(chosen <= 1.0);
    REQUIRE(entry["top_probs"].size() <= 3);  // top_k kept three
    double mass = 0.0;
    bool listed = false;
    for (const Json& t : entry["top_probs"]) {
      mass += t["prob"].get<double>();
      listed |= t["token"] == entry["token"] && t["prob"] == entry["prob"];
    }
    CHECK(mass == doctest::Approx(1.0).epsilon(1e-4));
    CHECK(listed);
  }
  CHECK(a["logprobs"]["content"][0].contains("logprob"));
}

namespace {

// Each prompt completed greedily alone with drafting off (`speculative.n_max: 0`,
// llama-server's field), then all at once side by side with the server's drafting:
// {plain, drafted}, in the prompts' order.
std::pair<std::vector<Json>, std::vector<Json>> plain_and_drafted(
    ServerProcess& server, const std::vector<std::string>& prompts, int max_tokens) {
  const auto body = [&](const std::string& prompt, bool drafting) {
    Json json = {
        {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
    if (!drafting) json["speculative.n_max"] = 0;
    return json.dump();
  };
  const auto complete = [&](const std::string& text) {
    httplib::Client client = server.client();
    const auto res = client.Post("/v1/completions", text, "application/json");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    return Json::parse(res->body);
  };
  std::vector<Json> plain, drafted(prompts.size());
  for (const std::string& p : prompts) plain.push_back(complete(body(p, false)));
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] { drafted[i] = complete(body(prompts[i], true)); });
  }
  for (auto& c : clients) c.join();
  return {std::move(plain), std::move(drafted)};
}

}  // namespace

TEST_CASE(
    "--spec-type ngram-simple: replies side by side are the undrafted ones; guesses counted") {
  // Guesses after a repeat of one token (--spec-ngram-size-n 1): the random fixture's
  // loops seldom repeat three, the default.
  ServerProcess server(
      {"-c", "2048", "-np", "4", "--spec-type", "ngram-simple", "--spec-ngram-size-n", "1"});
  // Prompts that repeat themselves, so that prompt lookup has guesses the random
  // fixture's loops then confirm.
  const std::vector<std::string> prompts = {
      "one two three one two three one two three one two",
      "Numbers: 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2",
      "The cat sat on the mat. The cat sat on the mat. The cat sat on the",
      "red green blue red green blue red green"};
  const auto [plain, drafted] = plain_and_drafted(server, prompts, 40);
  std::int64_t guesses = 0, kept = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    CAPTURE(i);
    CHECK(drafted[i]["choices"][0]["text"] == plain[i]["choices"][0]["text"]);
    CHECK_FALSE(plain[i]["timings"].contains("draft_n"));
    const Json& timings = drafted[i]["timings"];
    if (!timings.contains("draft_n")) continue;  // nothing drafted for this one
    CHECK(timings["draft_n_accepted"].get<std::int64_t>() <=
          timings["draft_n"].get<std::int64_t>());
    guesses += timings["draft_n"].get<std::int64_t>();
    kept += timings["draft_n_accepted"].get<std::int64_t>();
  }
  CHECK(guesses > 0);
  CHECK(kept > 0);
  httplib::Client client = server.client();
  CHECK(wait_for_metric(client, "smol_draft_tokens_total", double(guesses)) == double(guesses));
  CHECK(wait_for_metric(client, "smol_draft_tokens_accepted_total", double(kept)) == double(kept));
  const auto props = client.Get("/props");
  REQUIRE(props);
  const Json settings = Json::parse(props->body)["default_generation_settings"];
  CHECK(settings["speculative.type"] == "ngram-simple");
  CHECK(settings["speculative.n_max"] == 16);
  CHECK(settings["speculative.ngram_size_n"] == 1);
  // A bad value is the client's error, named.
  const Refusal bad =
      post(client, "/v1/completions", Json{{"prompt", "hi"}, {"speculative.n_max", -1}}.dump());
  CHECK(bad.status == 400);
  CHECK(bad.error["error"]["param"] == "speculative.n_max");
}

TEST_CASE("-md: a draft model's guesses, the undrafted replies, nearly all kept") {
  // The fixture as its own draft model: on the same batch-invariant kernels it guesses
  // the very tokens the model chooses.
  ServerProcess server({"-c", "1024", "-np", "2", "-md", kFixture, "--draft-max", "8"});
  const std::vector<std::string> prompts = {"Once upon a time", "The cat sat on the mat."};
  const auto [plain, drafted] = plain_and_drafted(server, prompts, 24);
  std::int64_t guesses = 0, kept = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    CAPTURE(i);
    CHECK(drafted[i]["choices"][0]["text"] == plain[i]["choices"][0]["text"]);
    const Json& timings = drafted[i]["timings"];
    REQUIRE(timings.contains("draft_n"));
    guesses += timings["draft_n"].get<std::int64_t>();
    kept += timings["draft_n_accepted"].get<std::int64_t>();
  }
  CHECK(guesses > 0);
  CHECK(kept * 10 >= guesses * 9);
  httplib::Client client = server.client();
  const auto props = client.Get("/props");
  REQUIRE(props);
  const Json settings = Json::parse(props->body)["default_generation_settings"];
  CHECK(settings["speculative.type"] == "draft");
  CHECK(settings["speculative.n_max"] == 8);
  CHECK(settings["speculative.ngram_size_n"] == 0);  // no prompt lookup with -md
  CHECK(server.output().find("speculative decoding: draft with") != std::string::npos);
}
