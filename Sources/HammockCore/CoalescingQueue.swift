/// A first-in, first-out queue in which an element with a key replaces the waiting element with the same
/// key and moves to the back: the newest of each key waits, in the order the newest ones arose.
///
/// stdout's lines (the newest state of each source and view) and stdin's control commands (the newest
/// `override` of each source) wait in one, so a consumer that does not read, or one that floods, costs
/// memory bounded by the number of keys, not by time.
///
/// A *barrier* (an answer to a control line) promises that everything waiting when it arrived is read
/// before it. A newer element that takes the place of one waiting ahead of a barrier moves to the back, so
/// the barrier moves back behind it too (barriers keep their order): the reader of a barrier has read the
/// newest state of each key that waited before it, and the queue still holds one element per key.
public struct CoalescingQueue<Element: Sendable>: Sendable {
    // Inlinable, with its storage usable from inlined code: stdout's queue is on the hot path of every line,
    // and an unspecialised generic across the module boundary would cost a metadata lookup per call.
    @usableFromInline var elements: [Int: Element] = [:]
    /// Slots in arrival order, with those of replaced elements left in until `compactIfMostlyDead`.
    @usableFromInline var order: [Int] = []
    @usableFromInline var slotByKey: [String: Int] = [:]
    @usableFromInline var nextSlot = 0
    @usableFromInline var deadSlots = 0
    /// Slots of the barriers that wait, ascending.
    @usableFromInline var barrierSlots: [Int] = []

    @inlinable public init() {}

    @inlinable public var count: Int { elements.count }
    @inlinable public var isEmpty: Bool { elements.isEmpty }

    /// The element waiting under `key`, which an `append` with that key would replace.
    @inlinable public func waiting(forKey key: String) -> Element? {
        slotByKey[key].flatMap { elements[$0] }
    }

    /// Appends `element` at the back; with a `key`, it replaces the element waiting under it, which is
    /// returned.
    @inlinable @discardableResult
    public mutating func append(_ element: Element, key: String?) -> Element? {
        // The element it replaces is already the last (a source that changes while the reader is away, and
        // nothing else did meanwhile): moving to the back is staying in place, and no barrier is behind it.
        // The common case of a busy key, at the cost of one lookup.
        if let key, let slot = slotByKey[key], slot == order.last, elements[slot] != nil {
            return elements.updateValue(element, forKey: slot)
        }
        var replaced: Element?
        var replacedSlot: Int?
        if let key {
            if let slot = slotByKey[key], let old = elements.removeValue(forKey: slot) {
                replaced = old
                replacedSlot = slot
                deadSlots += 1
            }
            slotByKey[key] = nextSlot
        }
        put(element)
        if let replacedSlot, let last = barrierSlots.last, last > replacedSlot {
            // The barriers behind the replaced element's place follow the element to the back.
            let first = barrierSlots.firstIndex { $0 > replacedSlot }!
            for index in first..<barrierSlots.count {
                let barrier = elements.removeValue(forKey: barrierSlots[index])!
                deadSlots += 1
                barrierSlots[index] = nextSlot
                put(barrier)
            }
        }
        compactIfMostlyDead()
        return replaced
    }

    /// Appends a barrier: an element no other replaces, read only after everything that waits now, or the
    /// newer elements that take their places.
    @inlinable public mutating func appendBarrier(_ element: Element) {
        barrierSlots.append(nextSlot)
        put(element)
    }

    @inlinable mutating func put(_ element: Element) {
        elements[nextSlot] = element
        order.append(nextSlot)
        nextSlot += 1
    }

    /// The most waiting elements whose room a `removeAll` keeps.
    @usableFromInline static var capacityKept: Int { 64 }

    /// Everything that waits, oldest first; the queue is empty after.
    @inlinable public mutating func removeAll() -> [Element] {
        let taken = order.compactMap { elements[$0] }
        // The room of a usual batch is kept for the next; that of a burst (every source's first line) is not,
        // or it would be held for good: a dictionary sized for a thousand lines.
        let keeps = order.count <= Self.capacityKept
        elements.removeAll(keepingCapacity: keeps)
        order.removeAll(keepingCapacity: keeps)
        slotByKey.removeAll(keepingCapacity: keeps)
        barrierSlots.removeAll(keepingCapacity: keeps)
        deadSlots = 0
        return taken
    }

    /// Keeps `order` as bounded as the elements themselves however many replacements arrive between takes.
    @inlinable mutating func compactIfMostlyDead() {
        guard deadSlots > max(64, elements.count) else { return }
        order = order.filter { elements[$0] != nil }
        deadSlots = 0
    }
}
