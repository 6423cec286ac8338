import HammockJSON

/// The options of the built-in `fake` kind, for building and testing consumers without a network.
public struct FakeOptions: Sendable, Equatable {
    public enum Outcome: String, Sendable, CaseIterable {
        /// Answer with `content`.
        case data
        /// Never answer: the source stays loading.
        case loading
        /// Answer with `error`.
        case error
    }

    public var content: JSONValue
    public var outcome: Outcome
    public var error: SourceError
    public var delay: Duration

    public static let keys = ["content", "state", "error", "delay"]

    public init(options: JSONValue) throws(OptionProblems) {
        var problems: [OptionProblem] = []
        let object = options.objectValue ?? [:]
        for key in object.keys where !Self.keys.contains(key) {
            problems.append(
                OptionProblem(
                    pointer: JSONPointer(tokens: [key]),
                    message: unknownKeyMessage(key, known: Self.keys + CommonSourceKey.names, context: "a fake source")))
        }
        content = object["content"] ?? .null
        outcome = .data
        if let state = object["state"] {
            if let name = state.stringValue, let parsed = Outcome(rawValue: name) {
                outcome = parsed
            } else {
                problems.append(
                    OptionProblem(
                        pointer: JSONPointer(tokens: ["state"]),
                        message: "state must be one of data, loading, error"))
            }
        }
        error = SourceError(message: "fake error")
        switch object["error"] {
        case nil: break
        case .string(let message)?: error = SourceError(message: message)
        case .object(let fields)?:
            error = SourceError(
                message: fields["message"]?.stringValue ?? "fake error",
                httpStatus: fields["httpStatus"]?.numberValue?.intValue,
                exitStatus: fields["exitStatus"]?.numberValue?.intValue,
                code: fields["code"]?.stringValue.map { SourceError.Code($0) })
        case let other?:
            problems.append(
                OptionProblem(
                    pointer: JSONPointer(tokens: ["error"]),
                    message: "error must be a message or a mapping {message, httpStatus, exitStatus, code}, found \(other.kindName)"))
        }
        delay = .zero
        if let delayValue = object["delay"] {
            switch parseDuration(delayValue.stringValue ?? delayValue.numberValue?.text ?? "") {
            case .success(let parsed): delay = parsed
            case .failure(let problem):
                problems.append(OptionProblem(pointer: JSONPointer(tokens: ["delay"]), message: problem.message))
            }
        }
        if !problems.isEmpty { throw OptionProblems(problems: problems) }
    }
}
