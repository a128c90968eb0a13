// InProcessTransport: mailboxes guarded by a mutex each, woken by a
// condition variable on arrival or abort; and run_workers.
#include "exec/transport/in_process.hpp"

#include <chrono>
#include <exception>
#include <thread>

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

std::vector<float> InProcessTransport::wait_for(int to, int from, int64_t tag) {
  Mailbox& mailbox = *mailboxes_[static_cast<size_t>(to)];
  std::unique_lock<std::mutex> lock(mailbox.mutex);
  const auto ready = [&] {
    if (aborted()) return true;
    const auto queue = mailbox.queues.find({from, tag});
    return queue != mailbox.queues.end() && !queue->second.empty();
  };
  if (recv_timeout_s_ > 0) {
    const auto timeout = std::chrono::duration<double>(recv_timeout_s_);
    if (!mailbox.arrived.wait_for(lock, timeout, ready)) {
      lock.unlock();
      abort("worker " + std::to_string(to) + " waited over " + std::to_string(recv_timeout_s_) +
            " s for a message from worker " + std::to_string(from) + " with tag " + std::to_string(tag));
      throw_aborted();
    }
  } else {
    mailbox.arrived.wait(lock, ready);
  }
  if (aborted()) {
    lock.unlock();
    throw_aborted();
  }
  const auto queue = mailbox.queues.find({from, tag});
  std::vector<float> payload = std::move(queue->second.front());
  queue->second.pop_front();
  if (queue->second.empty()) mailbox.queues.erase(queue);  // tags are many; keep the map small
  return payload;
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
