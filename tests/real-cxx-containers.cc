// A C++ workload over the standard containers, run by tests/real-programs.sh with and
// without LD_PRELOAD=$THPALLOC_LIB: the output (checksums of what was built) must match.
// Deterministic: fixed seeds, results combined in a fixed order.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace
{

uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 1099511628211ULL;
    }
    return h;
}

uint64_t fnv_str(uint64_t h, const std::string &s)
{
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ULL;
    }
    return h;
}

struct Node {
    std::string name;
    std::vector<int> data;
    std::shared_ptr<Node> next;
    explicit Node(std::string n) : name(std::move(n)) {}
};

// One worker's job: build and churn containers, return a checksum.
uint64_t work(unsigned id)
{
    std::mt19937_64 rng(1234 + id);
    uint64_t h = 14695981039346656037ULL;

    std::vector<std::string> words;
    for (int i = 0; i < 60000; i++) {
        std::string w;
        int len = 1 + static_cast<int>(rng() % 40);
        for (int j = 0; j < len; j++)
            w.push_back(static_cast<char>('a' + rng() % 26));
        words.push_back(std::move(w));
    }
    std::unordered_map<std::string, int> counts;
    std::map<std::string, std::vector<int>> index;
    for (size_t i = 0; i < words.size(); i++) {
        const std::string key = words[i].substr(0, 3);
        counts[key]++;
        index[key].push_back(static_cast<int>(i));
    }
    for (const auto &kv : index) {
        h = fnv_str(h, kv.first);
        h = fnv(h, kv.second.size());
        h = fnv(h, static_cast<uint64_t>(counts[kv.first]));
    }
    // erase half, reinsert, so freed nodes get reused
    for (auto it = index.begin(); it != index.end();)
        it = (it->first[0] % 2) ? index.erase(it) : std::next(it);
    for (int i = 0; i < 20000; i++)
        index[words[rng() % words.size()]].assign(1 + rng() % 64, i);
    h = fnv(h, index.size());

    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    for (size_t i = 0; i < words.size(); i += 97)
        h = fnv_str(h, words[i]);

    std::string big;
    for (int i = 0; i < 200000; i++) {
        big += words[rng() % words.size()];
        if (big.size() > 1 << 20) {
            h = fnv_str(h, big.substr(big.size() - 64));
            h = fnv(h, big.size());
            big.clear();
            big.shrink_to_fit();
        }
    }

    // a shared_ptr linked list, dropped from the head
    std::shared_ptr<Node> head;
    for (int i = 0; i < 20000; i++) {
        auto n = std::make_shared<Node>("node" + std::to_string(i));
        n->data.resize(static_cast<size_t>(rng() % 100));
        n->next = head;
        head = n;
    }
    uint64_t total = 0;
    for (auto p = head.get(); p; p = p->next.get())
        total += p->data.size() + p->name.size();
    h = fnv(h, total);
    while (head) // iterative release (a recursive one could overflow the stack)
        head = std::move(head->next);

    std::deque<std::vector<double>> dq;
    std::list<std::set<int>> ls;
    for (int i = 0; i < 30000; i++) {
        dq.emplace_back(static_cast<size_t>(rng() % 32), 1.5);
        if (dq.size() > 1000)
            dq.pop_front();
        if (i % 10 == 0) {
            std::set<int> s;
            for (int j = 0; j < 20; j++)
                s.insert(static_cast<int>(rng() % 1000));
            ls.push_back(std::move(s));
            if (ls.size() > 300)
                ls.pop_front();
        }
    }
    for (const auto &s : ls)
        h = fnv(h, static_cast<uint64_t>(*s.begin() + *s.rbegin()));
    return h;
}

// shared_ptrs created in one thread, released in another
uint64_t handoff()
{
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<std::vector<uint64_t>>> q;
    bool done = false;
    uint64_t sum = 0;
    std::thread consumer([&] {
        for (;;) {
            std::unique_lock<std::mutex> lk(mu);
            cv.wait(lk, [&] { return !q.empty() || done; });
            if (q.empty())
                return;
            auto v = std::move(q.front());
            q.pop_front();
            lk.unlock();
            for (uint64_t x : *v)
                sum += x;
        }
    });
    for (uint64_t i = 0; i < 20000; i++) {
        auto v = std::make_shared<std::vector<uint64_t>>(static_cast<size_t>(i % 300), i);
        {
            std::lock_guard<std::mutex> lk(mu);
            q.push_back(std::move(v));
        }
        cv.notify_one();
    }
    {
        std::lock_guard<std::mutex> lk(mu);
        done = true;
    }
    cv.notify_one();
    consumer.join();
    return sum;
}

} // namespace

int main()
{
    const unsigned nthreads = 4;
    std::vector<uint64_t> results(nthreads);
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < nthreads; i++)
        threads.emplace_back([&results, i] { results[i] = work(i); });
    for (auto &t : threads)
        t.join();
    for (unsigned i = 0; i < nthreads; i++)
        std::printf("worker %u: %016llx\n", i, static_cast<unsigned long long>(results[i]));
    std::printf("handoff: %llu\n", static_cast<unsigned long long>(handoff()));
    return 0;
}
