/// At most `width` tests run a hammock at a time.
///
/// Swift Testing starts every test of the suite at once. On a 2-core machine a hundred hammocks, each with
/// its plugins, starting together starve one another for seconds, and tests whose subject is a deadline (a
/// plugin's 5 s `configure`, a fake source's 10 s timeout) then measure the machine instead of hammock. A
/// test waits for a slot before it starts its process; a test that already holds one (a second hammock
/// inside `withRunning`) does not wait again, so nesting cannot deadlock.
public actor RunSlots {
    public static let shared = RunSlots(width: 6)

    @TaskLocal static var isHeld = false

    private let width: Int
    private var running = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(width: Int) { self.width = width }

    /// Runs `body` holding a slot.
    public static func withSlot<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        if isHeld { return try await body() }
        await shared.acquire()
        do {
            let result = try await $isHeld.withValue(true) { try await body() }
            await shared.release()
            return result
        } catch {
            await shared.release()
            throw error
        }
    }

    private func acquire() async {
        if running < width {
            running += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Hands the slot to the next waiter, if any, else frees it.
    private func release() {
        if waiting.isEmpty {
            running -= 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
