// protoncpp-fidelity: the Proton C++ client of the fidelity matrix (tests/interop/test_fidelity_matrix.py).
//
//   protoncpp-fidelity send    --url URL --address A --input IN.bin --sent SENT.bin
//   protoncpp-fidelity receive --url URL --address A --count N --output OUT.bin
//
// Files hold messages as a 4-byte big-endian length, then the encoded message.
// send: each message of IN is read with proton::message::decode and sent with sender::send; what
// proton::message::encode gives for it (what the library puts on the wire) is appended to SENT.
// receive: grants N credits; each proton::message received is encoded again with
// proton::message::encode and appended to OUT (the C++ API does not expose a delivery's raw bytes).
// Output: JSON lines like the other interop clients. Exit: 0 done, 1 not accepted, 2 error, 64 usage.
#include <proton/connection.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/error_condition.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

const char *USAGE =
    "usage: protoncpp-fidelity send --url URL --address A --input IN.bin --sent SENT.bin\n"
    "       protoncpp-fidelity receive --url URL --address A --count N --output OUT.bin";

std::string json_str(const std::string &s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') { out += '\\'; out += char(c); }
        else if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); out += b; }
        else out += char(c);
    }
    return out + "\"";
}

void write_frame(std::ofstream &f, const std::vector<char> &data) {
    unsigned char len[4] = {(unsigned char)(data.size() >> 24), (unsigned char)(data.size() >> 16),
                            (unsigned char)(data.size() >> 8), (unsigned char)data.size()};
    f.write(reinterpret_cast<char *>(len), 4);
    f.write(data.data(), std::streamsize(data.size()));
    f.flush();
}

std::vector<std::vector<char>> read_frames(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::vector<std::vector<char>> out;
    unsigned char len[4];
    while (f.read(reinterpret_cast<char *>(len), 4)) {
        size_t n = size_t(len[0]) << 24 | size_t(len[1]) << 16 | size_t(len[2]) << 8 | len[3];
        std::vector<char> m(n);
        if (n && !f.read(m.data(), std::streamsize(n))) throw std::runtime_error("truncated " + path);
        out.push_back(std::move(m));
    }
    return out;
}

struct options {
    bool sending = false;
    std::string url, address, input, sent, output;
    int count = 0;
};

class client : public proton::messaging_handler {
  public:
    explicit client(const options &o) : opt(o) {
        if (opt.sending) {
            messages = read_frames(opt.input);
            sent_file.open(opt.sent, std::ios::binary);
        } else {
            out_file.open(opt.output, std::ios::binary);
        }
    }
    int rc = 0;

  private:
    options opt;
    std::vector<std::vector<char>> messages;
    std::ofstream sent_file, out_file;
    size_t next = 0, settled = 0;
    int got = 0;

    void on_container_start(proton::container &c) override {
        proton::connection conn = c.connect(opt.url);
        if (opt.sending) conn.open_sender(opt.address);
        else conn.open_receiver(opt.address, proton::receiver_options().credit_window(0));
    }

    void on_receiver_open(proton::receiver &r) override { r.add_credit(opt.count); }

    void on_sendable(proton::sender &s) override {
        while (s.credit() > 0 && next < messages.size()) {
            proton::message m;
            m.decode(messages[next]);
            std::vector<char> wire;
            m.encode(wire);
            s.send(m);
            write_frame(sent_file, wire);
            std::printf("{\"event\":\"sent\",\"n\":%zu,\"size\":%zu}\n", next, wire.size());
            messages[next].clear();
            messages[next].shrink_to_fit();
            ++next;
        }
    }

    void outcome(proton::tracker &t, const char *state) {
        std::printf("{\"event\":\"settled\",\"state\":\"%s\"}\n", state);
        if (std::strcmp(state, "accepted")) rc = 1;
        if (++settled == messages.size()) {
            std::printf("{\"event\":\"summary\",\"sent\":%zu}\n", settled);
            t.connection().close();
        }
    }
    void on_tracker_accept(proton::tracker &t) override { outcome(t, "accepted"); }
    void on_tracker_reject(proton::tracker &t) override { outcome(t, "rejected"); }
    void on_tracker_release(proton::tracker &t) override { outcome(t, "released"); }

    void on_message(proton::delivery &d, proton::message &m) override {
        std::vector<char> bytes;
        m.encode(bytes);
        write_frame(out_file, bytes);
        std::printf("{\"event\":\"message\",\"n\":%d,\"size\":%zu,\"raw\":false}\n", got, bytes.size());
        if (++got == opt.count) {
            std::printf("{\"event\":\"summary\",\"received\":%d}\n", got);
            d.connection().close();
        }
    }

    void on_error(const proton::error_condition &e) override {
        std::printf("{\"event\":\"error\",\"condition\":%s,\"description\":%s}\n", json_str(e.name()).c_str(),
                    json_str(e.description()).c_str());
        rc = 2;
    }
};

}  // namespace

int main(int argc, char **argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    options o;
    if (argc < 2 || (std::strcmp(argv[1], "send") && std::strcmp(argv[1], "receive"))) {
        std::cerr << USAGE << "\n";
        return 64;
    }
    o.sending = !std::strcmp(argv[1], "send");
    for (int i = 2; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--url") o.url = v;
        else if (k == "--address") o.address = v;
        else if (k == "--input") o.input = v;
        else if (k == "--sent") o.sent = v;
        else if (k == "--output") o.output = v;
        else if (k == "--count") o.count = std::stoi(v);
        else if (k == "--timeout") continue;
        else { std::cerr << "unknown option " << k << "\n" << USAGE << "\n"; return 64; }
    }
    if (o.url.empty() || o.address.empty() || (o.sending ? o.input.empty() || o.sent.empty() : o.output.empty())) {
        std::cerr << USAGE << "\n";
        return 64;
    }
    try {
        client c(o);
        proton::container(c).run();
        return c.rc;
    } catch (const std::exception &e) {
        std::printf("{\"event\":\"error\",\"where\":\"client\",\"description\":%s}\n", json_str(e.what()).c_str());
        return 2;
    }
}
