import HammockJSON

/// A problem with one of a kind's options, at a JSON Pointer into the source's options; the configuration
/// loader turns the pointer back into the YAML line and column.
public struct OptionProblem: Sendable, Hashable {
    public var pointer: JSONPointer
    public var message: String

    public init(pointer: JSONPointer, message: String) {
        self.pointer = pointer
        self.message = message
    }
}

/// Every problem a kind found with one source's options, reported together so the user fixes them in one go.
public struct OptionProblems: Error, Sendable {
    public var problems: [OptionProblem]
    public init(problems: [OptionProblem]) { self.problems = problems }
}
