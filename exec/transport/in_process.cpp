// InProcessTransport: mailboxes guarded by a mutex each, woken by a
// condition variable on arrival or abort; and run_workers.
#include "exec/transport/in_process.hpp"

#include <chrono>
#include <exception>
#include <string>
#include <thread>

#include "exec/tensor/range_network.hpp"
#include "model/error.hpp"

namespace trainsim {

InProcessTransport::InProcessTransport(int workers, double recv_timeout_s)
    : Transport(workers), recv_timeout_s_(recv_timeout_s) {
  TRAINSIM_CHECK(recv_timeout_s >= 0, "InProcessTransport: recv_timeout_s must be >= 0");
  for (int w = 0; w < workers; ++w) mailboxes_.push_back(std::make_unique<Mailbox>());
}

void InProcessTransport::wake_waiters() {
  // Taking each mailbox's mutex before notifying: a waiter that checked the
  // flag just before it was set is already waiting and gets the wake-up.
  for (auto& mailbox : mailboxes_) {
    const std::lock_guard<std::mutex> lock(mailbox->mutex);
    mailbox->arrived.notify_all();
  }
  for (auto& d : kept_) {
    const std::lock_guard<std::mutex> lock(d->mutex);
    d->arrived.notify_all();
  }
  if (passer_ != nullptr) passer_->abandon();
}

void InProcessTransport::deliver(int from, int to, int64_t tag, std::vector<float> payload, SendReturns /*returns*/) {
  if (aborted()) throw_aborted();
  Mailbox& mailbox = *mailboxes_[static_cast<size_t>(to)];
  {
    const std::lock_guard<std::mutex> lock(mailbox.mutex);
    mailbox.queues[{from, tag}].push_back(std::move(payload));
  }
  // Every waiter of `to` wakes (a worker may wait on several streams); each
  // rechecks its own queue.
  mailbox.arrived.notify_all();
}

void InProcessTransport::wait_until(std::condition_variable& arrived, std::unique_lock<std::mutex>& lock,
                                    const std::function<bool()>& ready, int to, int from, int64_t tag,
                                    const char* what) {
  const auto done = [&] { return aborted() || ready(); };
  if (recv_timeout_s_ > 0) {
    if (!arrived.wait_for(lock, std::chrono::duration<double>(recv_timeout_s_), done)) {
      lock.unlock();
      abort("worker " + std::to_string(to) + " waited over " + std::to_string(recv_timeout_s_) + " s for " + what +
            " from worker " + std::to_string(from) + " with tag " + std::to_string(tag));
      throw_aborted();
    }
  } else {
    arrived.wait(lock, done);
  }
  if (aborted()) {
    lock.unlock();
    throw_aborted();
  }
}

std::vector<float> InProcessTransport::wait_for(int to, int from, int64_t tag) {
  Mailbox& mailbox = *mailboxes_[static_cast<size_t>(to)];
  std::unique_lock<std::mutex> lock(mailbox.mutex);
  const auto ready = [&] {
    const auto queue = mailbox.queues.find({from, tag});
    return queue != mailbox.queues.end() && !queue->second.empty();
  };
  wait_until(mailbox.arrived, lock, ready, to, from, tag, "a message");
  const auto queue = mailbox.queues.find({from, tag});
  std::vector<float> payload = std::move(queue->second.front());
  queue->second.pop_front();
  if (queue->second.empty()) mailbox.queues.erase(queue);  // tags are many; keep the map small
  return payload;
}

void InProcessTransport::pass_kept_by(std::shared_ptr<KeptPasser> passer) {
  passer_ = std::move(passer);
  kept_.clear();
  if (passer_ == nullptr) return;
  for (int k = 0; k < workers() * workers(); ++k) kept_.push_back(std::make_unique<KeptDirection>());
}

bool InProcessTransport::passes_kept(int from, int to) const { return passer_ != nullptr && from != to; }

void InProcessTransport::open_kept_paths(const std::vector<std::pair<int, int>>& directions) {
  if (passer_ != nullptr && !directions.empty()) passer_->open(directions, [this] { return aborted(); });
}

void InProcessTransport::deliver_kept(int from, int to, int64_t tag, const ExportedBoundary& values, int64_t floats) {
  if (aborted()) throw_aborted();
  KeptDirection& d = direction(from, to);
  const std::lock_guard<std::mutex> order(d.send_mutex);
  {
    const std::lock_guard<std::mutex> lock(d.mutex);
    d.headers.emplace_back(tag, floats);
  }
  d.arrived.notify_all();
  if (!passer_->send(from, to, *values.values, floats, [this] { return aborted(); })) throw_aborted();
}

PassedKept InProcessTransport::wait_for_kept(int to, int from, int64_t tag, const MakeKept& make) {
  KeptDirection& d = direction(from, to);
  return d.arrivals.take(tag, [&]() -> std::pair<int64_t, PassedKept> {
    std::pair<int64_t, int64_t> header;
    {
      std::unique_lock<std::mutex> lock(d.mutex);
      wait_until(
          d.arrived, lock, [&] { return !d.headers.empty(); }, to, from, tag, "an array");
      header = d.headers.front();
      d.headers.pop_front();
    }
    std::shared_ptr<const ExportedBoundary> into = make(header.second);
    TRAINSIM_CHECK(into != nullptr && into->values != nullptr,
                   "InProcessTransport: a kept array passed to a device that keeps none");
    if (!passer_->recv(to, from, *into->values, header.second, [this] { return aborted(); })) throw_aborted();
    return {header.first, {std::move(into), header.second}};
  });
}

void run_workers(Transport& transport, int threads, const std::function<void(int)>& body) {
  TRAINSIM_CHECK(threads >= 1, "run_workers: needs at least one thread");
  std::mutex failure_mutex;
  std::exception_ptr first_failure;  // the first exception that is not a TransportAborted
  std::exception_ptr first_abort;
  std::vector<std::thread> running;
  running.reserve(static_cast<size_t>(threads));
  for (int w = 0; w < threads; ++w) {
    running.emplace_back([&, w] {
      try {
        body(w);
      } catch (const TransportAborted&) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (!first_abort) first_abort = std::current_exception();
      } catch (const std::exception& error) {
        {
          const std::lock_guard<std::mutex> lock(failure_mutex);
          if (!first_failure) first_failure = std::current_exception();
        }
        transport.abort("worker " + std::to_string(w) + " failed: " + error.what());
      } catch (...) {
        {
          const std::lock_guard<std::mutex> lock(failure_mutex);
          if (!first_failure) first_failure = std::current_exception();
        }
        transport.abort("worker " + std::to_string(w) + " failed");
      }
    });
  }
  for (auto& thread : running) thread.join();
  if (first_failure) std::rethrow_exception(first_failure);
  if (first_abort) std::rethrow_exception(first_abort);
}

}  // namespace trainsim
