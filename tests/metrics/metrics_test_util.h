#ifndef RELSERVE_TESTS_METRICS_METRICS_TEST_UTIL_H_
#define RELSERVE_TESTS_METRICS_METRICS_TEST_UTIL_H_

// Helpers shared by the metrics tests: a parser for the Prometheus text format and a raw
// loopback HTTP client (plain sockets, so the tests see exactly what goes over the wire).

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace relserve::metrics_test {

// One sample line: name{labels} value.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> help;  // family -> help text
  std::map<std::string, std::string> type;  // family -> type
  std::vector<std::string> errors;          // lines that did not parse

  // The value of the sample with exactly these labels, if present.
  std::optional<double> Value(const std::string& name,
                              const std::map<std::string, std::string>& labels) const {
    for (const Sample& s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return std::nullopt;
  }
  // Every sample with this name whose labels include `subset`.
  std::vector<Sample> Find(const std::string& name,
                           const std::map<std::string, std::string>& subset = {}) const {
    std::vector<Sample> out;
    for (const Sample& s : samples) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : subset) {
        auto it = s.labels.find(k);
        if (it == s.labels.end() || it->second != v) match = false;
      }
      if (match) out.push_back(s);
    }
    return out;
  }
};

inline bool ParseLabels(const std::string& line, size_t* pos,
                        std::map<std::string, std::string>* labels) {
  size_t i = *pos;  // just after '{'
  while (i < line.size() && line[i] != '}') {
    size_t eq = line.find('=', i);
    if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') return false;
    std::string key = line.substr(i, eq - i);
    std::string value;
    size_t j = eq + 2;
    for (; j < line.size() && line[j] != '"'; ++j) {
      if (line[j] == '\\' && j + 1 < line.size()) {
        ++j;
        value += line[j] == 'n' ? '\n' : line[j];
      } else {
        value += line[j];
      }
    }
    if (j >= line.size()) return false;
    (*labels)[key] = value;
    i = j + 1;
    if (i < line.size() && line[i] == ',') ++i;
  }
  if (i >= line.size()) return false;
  *pos = i + 1;
  return true;
}

inline Exposition ParseExposition(const std::string& text) {
  Exposition out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, kind, family;
      words >> hash >> kind >> family;
      std::string rest;
      std::getline(words, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (kind == "HELP") out.help[family] = rest;
      if (kind == "TYPE") out.type[family] = rest;
      continue;
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (i < line.size() && line[i] == '{') {
      ++i;
      if (!ParseLabels(line, &i, &s.labels)) {
        out.errors.push_back(line);
        continue;
      }
    }
    if (i >= line.size() || line[i] != ' ') {
      out.errors.push_back(line);
      continue;
    }
    const std::string value = line.substr(i + 1);
    if (value == "+Inf") {
      s.value = HUGE_VAL;
    } else if (value == "-Inf") {
      s.value = -HUGE_VAL;
    } else {
      char* end = nullptr;
      s.value = std::strtod(value.c_str(), &end);
      // A timestamp may follow the value; prometheus-cpp writes none.
      if (end == value.c_str()) {
        out.errors.push_back(line);
        continue;
      }
    }
    out.samples.push_back(std::move(s));
  }
  return out;
}

// ---- raw HTTP over loopback ----

struct HttpResponse {
  int status = 0;                              // 0 if no status line arrived
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string raw;

  std::string Header(const std::string& lower_case_name) const {
    auto it = headers.find(lower_case_name);
    return it == headers.end() ? "" : it->second;
  }
};

// Connects to 127.0.0.1:port; -1 on failure.
inline int ConnectLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Connects to 127.0.0.1:port from the loopback address `source` (any of 127.0.0.0/8 works on
// Linux), so that one test can act as several peers; -1 on failure or when the connection is
// not established within connect_timeout_ms (a server whose backlog is full drops the SYN and
// connect() would otherwise retry for minutes). With connect_timeout_ms = 0 the socket is left
// non-blocking with its connect under way. A `receive_buffer` > 0 shrinks the socket's receive
// buffer (a client that does not read fills up sooner).
inline int ConnectLoopbackFrom(const std::string& source, int port, int receive_buffer = 0,
                               int connect_timeout_ms = 5000) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (receive_buffer > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  }
  sockaddr_in from{};
  from.sin_family = AF_INET;
  if (::inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
    ::close(fd);
    return -1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) {
      ::close(fd);
      return -1;
    }
    if (connect_timeout_ms == 0) return fd;
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    if (::poll(&p, 1, connect_timeout_ms) != 1 ||
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      ::close(fd);
      return -1;
    }
  }
  if (connect_timeout_ms != 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// Whether the peer closed `fd` within timeout_ms (data that arrives first is read and dropped).
inline bool ClosedWithin(int fd, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    if (::recv(fd, buf, sizeof(buf), 0) <= 0) return true;
  }
}

inline bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads until EOF or until timeout_ms passes without completing. Returns what was read;
// *eof tells whether the peer closed.
inline std::string ReadUntilClose(int fd, int timeout_ms, bool* eof = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string data;
  if (eof) *eof = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return data;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[8192];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      if (eof) *eof = true;
      return data;
    }
    data.append(buf, static_cast<size_t>(n));
  }
}

inline HttpResponse ParseResponse(const std::string& raw) {
  HttpResponse r;
  r.raw = raw;
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return r;
  std::istringstream head(raw.substr(0, head_end));
  std::string line;
  std::getline(head, line);
  if (line.rfind("HTTP/1.1 ", 0) == 0 && line.size() >= 12) r.status = std::atoi(line.c_str() + 9);
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value[0] == ' ') value.erase(0, 1);
    r.headers[name] = value;
  }
  r.body = raw.substr(head_end + 4);
  return r;
}

// Sends `request` verbatim and reads the whole response (the server closes after it).
inline HttpResponse RawRequest(int port, const std::string& request, int timeout_ms = 5000) {
  int fd = ConnectLoopback(port);
  if (fd < 0) return {};
  SendAll(fd, request);
  std::string raw = ReadUntilClose(fd, timeout_ms);
  ::close(fd);
  return ParseResponse(raw);
}

inline HttpResponse HttpGet(int port, const std::string& path, const std::string& method = "GET") {
  return RawRequest(port, method + " " + path +
                              " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: test\r\n\r\n");
}

// HttpGet from the loopback address `source`.
inline HttpResponse HttpGetFrom(const std::string& source, int port, const std::string& path,
                                int timeout_ms = 5000) {
  int fd = ConnectLoopbackFrom(source, port);
  if (fd < 0) return {};
  SendAll(fd, "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: probe\r\n\r\n");
  std::string raw = ReadUntilClose(fd, timeout_ms);
  ::close(fd);
  return ParseResponse(raw);
}

}  // namespace relserve::metrics_test

#endif  // RELSERVE_TESTS_METRICS_METRICS_TEST_UTIL_H_
