// The disk as the engine sees it (issue 13): random O_DIRECT reads of one
// expert record each, at record offsets of the container's own bank files,
// with 1, 2, 4 and 8 reads in flight (one thread per read, each keeping one
// pread outstanding). Records are drawn without replacement over the whole
// probe, so no depth re-reads what another read (hosts may cache a disk
// image even under O_DIRECT). Prints one JSON line per depth and a summary
// with the best rate; bench/vs_warp.sh divides the engines' rates by it.
//   bench_disk_probe MODEL_DIR [--bytes-per-depth N] [--depths 1,2,4,8] [--seed S]
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sluice/sluice.h"

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_disk_probe MODEL_DIR [--bytes-per-depth N] [--depths 1,2,4,8] [--seed S]\n");
        return 2;
    }
    const std::string dir = argv[1];
    double per_depth = 1.0e9;
    uint64_t seed = 1;
    std::vector<int> depths = {1, 2, 4, 8};
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--bytes-per-depth") per_depth = std::atof(argv[i + 1]);
        else if (a == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
        else if (a == "--depths") {
            depths.clear();
            for (const char *p = argv[i + 1]; *p;) {
                depths.push_back(std::atoi(p));
                p = std::strchr(p, ',');
                if (!p) break;
                p++;
            }
        } else {
            std::fprintf(stderr, "bench_disk_probe: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    sluice_memory_plan plan;
    char err[512];
    if (sluice_plan_model(dir.c_str(), 0, 0, nullptr, &plan, err, sizeof err) != SLUICE_OK) {
        std::fprintf(stderr, "bench_disk_probe: %s\n", err);
        return 1;
    }
    const size_t rec = (size_t)plan.record_bytes;
    if (rec == 0 || rec % 4096) {
        std::fprintf(stderr, "bench_disk_probe: %s: record size %zu is not a positive multiple of 4 KiB\n", dir.c_str(), rec);
        return 1;
    }
    struct Slot {
        int fd;
        uint64_t off;
    };
    std::vector<Slot> slots;
    std::vector<int> fds;
    if (DIR *d = opendir(dir.c_str())) {
        while (dirent *e = readdir(d)) {
            const std::string n = e->d_name;
            if (n.rfind("experts-L", 0) != 0 || n.size() < 4 || n.substr(n.size() - 4) != ".bin") continue;
            const std::string path = dir + "/" + n;
            const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
            if (fd < 0) {
                std::fprintf(stderr, "bench_disk_probe: %s: cannot open with O_DIRECT: %s\n", path.c_str(), std::strerror(errno));
                return 1;
            }
            fds.push_back(fd);
            const off_t size = ::lseek(fd, 0, SEEK_END);
            for (uint64_t off = 0; off + rec <= (uint64_t)size; off += rec) slots.push_back({fd, off});
        }
        closedir(d);
    }
    if (slots.empty()) {
        std::fprintf(stderr, "bench_disk_probe: %s: no expert bank files (experts-L*.bin)\n", dir.c_str());
        return 1;
    }
    std::mt19937_64 rng(seed);
    std::shuffle(slots.begin(), slots.end(), rng);
    size_t next_slot = 0;
    double best = 0;
    int best_qd = 0;
    for (int qd : depths) {
        size_t n = std::max<size_t>((size_t)(per_depth / (double)rec), (size_t)qd * 4);
        n = std::min(n, slots.size());
        bool reused = false;
        if (next_slot + n > slots.size()) {  // small container: records read again (said in the output)
            next_slot = 0;
            reused = true;
        }
        std::atomic<size_t> next{next_slot};
        const size_t end = next_slot + n;
        std::atomic<bool> failed{false};
        const double t0 = now();
        std::vector<std::thread> ts;
        for (int t = 0; t < qd; t++)
            ts.emplace_back([&] {
                void *buf = nullptr;
                if (posix_memalign(&buf, 4096, rec)) {
                    failed = true;
                    return;
                }
                for (size_t i; (i = next.fetch_add(1)) < end;) {
                    size_t got = 0;
                    while (got < rec) {
                        const ssize_t r = ::pread(slots[i].fd, (char *)buf + got, rec - got, (off_t)(slots[i].off + got));
                        if (r <= 0) {
                            failed = true;
                            break;
                        }
                        got += (size_t)r;
                    }
                }
                std::free(buf);
            });
        for (auto &t : ts) t.join();
        const double dt = now() - t0;
        next_slot = end;
        if (failed) {
            std::fprintf(stderr, "bench_disk_probe: a read failed\n");
            return 1;
        }
        const double gbps = (double)(n * rec) / dt / 1e9;
        std::printf("{\"probe_qd\":%d,\"records\":%zu,\"record_bytes\":%zu,\"seconds\":%.3f,\"gbps\":%.4f%s}\n", qd, n,
                    rec, dt, gbps, reused ? ",\"reused_records\":true" : "");
        std::fflush(stdout);
        if (gbps > best) {
            best = gbps;
            best_qd = qd;
        }
    }
    std::printf("{\"probe_best_gbps\":%.4f,\"probe_best_qd\":%d}\n", best, best_qd);
    for (int fd : fds) ::close(fd);
    return 0;
}
