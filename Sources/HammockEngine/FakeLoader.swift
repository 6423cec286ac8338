import HammockCore
import HammockJSON

/// The built-in `fake` kind: answers with configured content, error or silence after a delay.
actor FakeLoader: SourceLoader {
    private let inbox: EngineInbox
    private var loads: [Int: Task<Void, Never>] = [:]

    init(inbox: EngineInbox) { self.inbox = inbox }

    func start(_ request: LoadRequest) {
        let options: FakeOptions
        do {
            options = try FakeOptions(options: request.options)
        } catch {
            let message = error.problems.map(\.message).joined(separator: "; ")
            inbox.yield(.loadFinished(
                source: request.source, loadID: request.loadID,
                outcome: .error(SourceError(message: message, code: .invalidOptions))))
            return
        }
        loads[request.loadID] = Task {
            defer { loads[request.loadID] = nil }
            if options.delay > .zero { try? await Task.sleep(for: options.delay) }
            if Task.isCancelled { return }
            let outcome: LoadOutcome
            switch options.outcome {
            case .data: outcome = .newData(options.content)
            case .error: outcome = .error(options.error)
            case .loading:
                // Stay loading until cancelled (or until the engine's own timeout gives up on the load): one
                // sleep longer than any run, which the cancellation ends.
                try? await Task.sleep(for: .seconds(1 << 30))
                return
            }
            inbox.yield(.loadFinished(source: request.source, loadID: request.loadID, outcome: outcome))
        }
    }

    func cancel(source: String, loadID: Int) {
        loads.removeValue(forKey: loadID)?.cancel()
    }

    func remove(source: String) {}

    func shutdown() {
        for task in loads.values { task.cancel() }
        loads.removeAll()
    }
}
