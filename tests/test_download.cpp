// The downloader against a loopback server (tests/chat/range_server.py): a whole
// transfer, one interrupted halfway and resumed, a server without Range support,
// Hugging Face's redirect with x-linked-etag, and checksums that do not match.
#include <doctest/doctest.h>

#if SMOL_HAVE_DOWNLOAD

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "scratch_dir.hpp"
#include "smol/net/download.hpp"

namespace {

namespace fs = std::filesystem;

// Runs the server as a child process for the lifetime of the object.
class LoopbackServer {
 public:
  LoopbackServer() {
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(pipe_fds[1], STDOUT_FILENO);
      ::close(pipe_fds[0]);
      ::close(pipe_fds[1]);
      const std::string script = std::string(SMOL_SOURCE_DIR) + "/tests/chat/range_server.py";
      ::execlp("python3", "python3", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(pipe_fds[1]);
    std::string line;
    char c = 0;
    while (::read(pipe_fds[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(pipe_fds[0]);
    REQUIRE_MESSAGE(!line.empty(), "the loopback server did not start");
    base_ = "http://127.0.0.1:" + line;
  }
  ~LoopbackServer() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  std::string url(const std::string& path) const { return base_ + path; }

 private:
  pid_t pid_ = -1;
  std::string base_;
};

LoopbackServer& server() {
  static LoopbackServer instance;
  return instance;
}

fs::path scratch(const std::string& name) {
  const fs::path path = smol::test::scratch_dir() / name;
  fs::remove(path);
  fs::remove(smol::net::partial_path(path));
  return path;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("a whole download is verified against the server's ETag") {
  const fs::path target = scratch("whole.bin");
  std::uint64_t last_done = 0, last_total = 0;
  const auto result =
      smol::net::download_file({.url = server().url("/file"),
                                .destination = target,
                                .on_progress = [&](const smol::net::DownloadProgress& p) {
                                  last_done = p.done;
                                  last_total = p.total;
                                }});
  CHECK(result.verified);
  CHECK(result.bytes == 3u << 20);
  CHECK(result.resumed_from == 0);
  CHECK(last_done == result.bytes);
  CHECK(last_total == result.bytes);
  CHECK(smol::net::sha256_file(target.string()) == result.sha256);
  CHECK_FALSE(fs::exists(smol::net::partial_path(target)));
}

TEST_CASE("an interrupted download keeps its .part file and resumes with a Range request") {
  const fs::path target = scratch("resumed.bin");
  const fs::path part = smol::net::partial_path(target);
  bool resumable = false;
  try {
    smol::net::download_file({.url = server().url("/drop/file"), .destination = target});
  } catch (const smol::net::DownloadError& error) {
    resumable = error.resumable();
    CHECK(std::string(error.what()).find("interrupted") != std::string::npos);
  }
  CHECK(resumable);
  REQUIRE(fs::exists(part));
  const auto half = fs::file_size(part);
  CHECK(half == (3u << 20) / 2);
  CHECK_FALSE(fs::exists(target));

  const auto result =
      smol::net::download_file({.url = server().url("/drop/file"), .destination = target});
  CHECK(result.resumed_from == half);
  CHECK(result.verified);
  CHECK(result.bytes == 3u << 20);
  CHECK_FALSE(fs::exists(part));

  // The same bytes as a download in one go.
  const fs::path whole = scratch("resumed-reference.bin");
  smol::net::download_file({.url = server().url("/file"), .destination = whole});
  CHECK(read_all(whole) == read_all(target));
}

TEST_CASE("a complete .part file is only verified and renamed") {
  const fs::path target = scratch("complete.bin");
  const fs::path reference = scratch("complete-reference.bin");
  smol::net::download_file({.url = server().url("/file"), .destination = reference});
  fs::copy_file(reference, smol::net::partial_path(target));
  const auto result =
      smol::net::download_file({.url = server().url("/file"), .destination = target});
  CHECK(result.verified);
  CHECK(result.resumed_from == 3u << 20);
  CHECK(read_all(target) == read_all(reference));
}

TEST_CASE("a server that ignores Range gets the file from the start") {
  const fs::path target = scratch("no-range.bin");
  {
    std::ofstream junk(smol::net::partial_path(target), std::ios::binary);
    junk << "stale bytes that must not stay in front";
  }
  const auto result =
      smol::net::download_file({.url = server().url("/no-range/file"), .destination = target});
  CHECK(result.verified);
  CHECK(result.resumed_from == 0);
  CHECK(result.bytes == 3u << 20);
}

TEST_CASE("Hugging Face's x-linked-etag on the redirect is the digest checked") {
  const fs::path target = scratch("redirect.bin");
  const auto result =
      smol::net::download_file({.url = server().url("/redirect/file"), .destination = target});
  CHECK(result.verified);
  CHECK(fs::exists(target));
}

TEST_CASE("a checksum mismatch deletes the download with a clear message") {
  const fs::path target = scratch("bad-etag.bin");
  std::string message;
  bool resumable = true;
  try {
    smol::net::download_file({.url = server().url("/bad-etag/file"), .destination = target});
  } catch (const smol::net::DownloadError& error) {
    message = error.what();
    resumable = error.resumable();
  }
  CHECK(message.find("checksum mismatch") != std::string::npos);
  CHECK_FALSE(resumable);
  CHECK_FALSE(fs::exists(target));
  CHECK_FALSE(fs::exists(smol::net::partial_path(target)));

  // A pinned digest is checked when the server names none.
  const fs::path pinned = scratch("pinned.bin");
  CHECK_THROWS_WITH_AS(smol::net::download_file({.url = server().url("/no-etag/file"),
                                                 .destination = pinned,
                                                 .expected_sha256 = std::string(64, 'a')}),
                       doctest::Contains("checksum mismatch"), smol::net::DownloadError);
  CHECK_FALSE(fs::exists(pinned));
  CHECK_FALSE(fs::exists(smol::net::partial_path(pinned)));
  // Without any digest the file is kept, marked unverified.
  const auto unverified =
      smol::net::download_file({.url = server().url("/no-etag/file"), .destination = pinned});
  CHECK_FALSE(unverified.verified);
  CHECK(fs::exists(pinned));
  // The server's digest is known before the body: a different file is refused early.
  CHECK_THROWS_WITH_AS(smol::net::download_file({.url = server().url("/redirect/file"),
                                                 .destination = pinned,
                                                 .expected_sha256 = std::string(64, 'a')}),
                       doctest::Contains("refused"), smol::net::DownloadError);
}

TEST_CASE("an HTTP error and an unreachable server are reported") {
  const fs::path target = scratch("missing.bin");
  CHECK_THROWS_WITH_AS(
      smol::net::download_file({.url = server().url("/missing"), .destination = target}),
      doctest::Contains("404"), smol::net::DownloadError);
  CHECK_FALSE(fs::exists(target));
  // Port 9 on loopback (discard) is closed on test machines: connection refused.
  CHECK_THROWS_AS(
      smol::net::download_file({.url = "http://127.0.0.1:9/file", .destination = target}),
      smol::net::DownloadError);
  // Neither failure received a byte, so neither leaves a .part file to "resume".
  CHECK_FALSE(fs::exists(smol::net::partial_path(target)));
}

TEST_CASE("the sha256 helper matches known digests") {
  CHECK(smol::net::sha256_hex("") ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(smol::net::sha256_hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(smol::net::detail::sha256_from_etag(
            " W/\"E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855\"\r\n") ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK_FALSE(smol::net::detail::sha256_from_etag("\"abc-123\"").has_value());
}

#else

TEST_CASE("downloader tests need libcurl and OpenSSL" * doctest::skip()) {}

#endif
