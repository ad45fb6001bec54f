// Copyright 2026 The vhost-rdma Authors. SPDX-License-Identifier: BSD-2-Clause
//
// A doubly linked intrusive list: the data path's work lists (QPs with a
// pending send queue, CQs that may hold completions, receive queues below
// their low watermark) link objects through a hook embedded in the object,
// so adding and removing never allocates and removal is O(1) (needed when
// an object is destroyed while listed).
#ifndef VRDMA_BACKEND_BASE_INTRUSIVE_LIST_H_
#define VRDMA_BACKEND_BASE_INTRUSIVE_LIST_H_

namespace vrdma {

template <typename T>
struct ListHook {
  T* prev = nullptr;
  T* next = nullptr;
  bool linked = false;
};

// Hook is a pointer to the ListHook<T> member of T.
template <typename T, ListHook<T> T::*Hook>
class IntrusiveList {
 public:
  bool empty() const { return head_ == nullptr; }
  T* front() const { return head_; }
  static T* next(T* t) { return (t->*Hook).next; }
  static bool linked(const T* t) { return (t->*Hook).linked; }

  // No-op when already linked.
  void PushBack(T* t) {
    ListHook<T>& h = t->*Hook;
    if (h.linked) return;
    h.linked = true;
    h.next = nullptr;
    h.prev = tail_;
    if (tail_)
      (tail_->*Hook).next = t;
    else
      head_ = t;
    tail_ = t;
  }

  // No-op when not linked.
  void Remove(T* t) {
    ListHook<T>& h = t->*Hook;
    if (!h.linked) return;
    if (h.prev)
      (h.prev->*Hook).next = h.next;
    else
      head_ = h.next;
    if (h.next)
      (h.next->*Hook).prev = h.prev;
    else
      tail_ = h.prev;
    h = {};
  }

  T* PopFront() {
    T* t = head_;
    if (t) Remove(t);
    return t;
  }

 private:
  T* head_ = nullptr;
  T* tail_ = nullptr;
};

}  // namespace vrdma

#endif  // VRDMA_BACKEND_BASE_INTRUSIVE_LIST_H_
