import HammockCore
import HammockJSON
import HammockPluginKit

/// A `fake` source's options, checked.
struct FakeOptions: Sendable, Equatable {
    enum Outcome: String, Sendable, CaseIterable {
        /// Answer with `content`.
        case data
        /// Never answer: the source stays loading.
        case loading
        /// Answer with `error`.
        case error
    }

    static let known = ["content", "state", "error", "delay"]

    var content: JSONValue
    var outcome: Outcome
    var error: SourceError
    var delay: Duration

    init(_ options: JSONValue) throws(OptionProblems) {
        var reader = OptionReader(options, known: Self.known, kind: "fake")
        content = reader.value("content") ?? .null
        outcome = .data
        if let state = reader.value("state") {
            if let name = state.stringValue, let parsed = Outcome(rawValue: name) {
                outcome = parsed
            } else {
                reader.problem("state", "state must be one of data, loading, error")
            }
        }
        error = SourceError(message: "fake error")
        switch reader.value("error") {
        case nil: break
        case .string(let message)?: error = SourceError(message: message)
        case .object(let fields)?:
            error = SourceError(
                message: fields["message"]?.stringValue ?? "fake error",
                httpStatus: fields["httpStatus"]?.numberValue?.intValue,
                exitStatus: fields["exitStatus"]?.numberValue?.intValue,
                code: fields["code"]?.stringValue.map { SourceError.Code($0) })
        case let other?:
            reader.problem(
                "error", "error must be a message or a mapping {message, httpStatus, exitStatus, code}, found \(other.kindName)")
        }
        delay = .zero
        // A bare number is read as its text, so that `delay: 5` is told it lacks a unit.
        if let value = reader.value("delay") {
            switch parseDuration(value.stringValue ?? value.numberValue?.text ?? "") {
            case .success(let parsed): delay = parsed
            case .failure(let problem): reader.problem("delay", problem.message)
            }
        }
        try reader.finish()
    }
}
