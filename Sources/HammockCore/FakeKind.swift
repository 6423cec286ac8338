import HammockJSON
import OrderedCollections

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
                    message: unknownKeyMessage(key, known: Self.keys + commonSourceKeys, context: "a fake source")))
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

public struct OptionProblems: Error, Sendable {
    public var problems: [OptionProblem]
    public init(problems: [OptionProblem]) { self.problems = problems }
}

/// The keys every source has, whatever its kind; everything else belongs to the kind.
public let commonSourceKeys = ["kind", "refresh", "expiration", "retry", "timeout", "select", "cache"]

/// `unknown key "urll" in a rest source (did you mean "url"?)`
public func unknownKeyMessage(_ key: String, known: [String], context: String) -> String {
    if let suggestion = closestMatch(to: key, among: known) {
        return "unknown key \"\(key)\" in \(context) (did you mean \"\(suggestion)\"?)"
    }
    return "unknown key \"\(key)\" in \(context); expected one of: \(known.joined(separator: ", "))"
}

/// The candidate within a small edit distance of `word`, if there is one.
///
/// The distance counts a swapped pair of neighbouring letters as one edit (`jsno` → `json`), the most
/// common typo; words of one or two letters get no suggestion, since almost anything is close to them.
public func closestMatch(to word: String, among candidates: [String]) -> String? {
    guard word.count > 2 else { return nil }
    let scored = candidates.sorted().map { (candidate: $0, distance: editDistance(word.lowercased(), $0.lowercased())) }
    guard let best = scored.min(by: { $0.distance < $1.distance }) else { return nil }
    let allowed = max(1, min(3, word.count / 3))
    return best.distance <= allowed ? best.candidate : nil
}

/// Optimal string alignment distance: insertions, deletions, substitutions and adjacent transpositions.
private func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a.unicodeScalars)
    let b = Array(b.unicodeScalars)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
    for i in 0...a.count { table[i][0] = i }
    for j in 0...b.count { table[0][j] = j }
    for i in 1...a.count {
        for j in 1...b.count {
            let cost = a[i - 1] == b[j - 1] ? 0 : 1
            table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
            }
        }
    }
    return table[a.count][b.count]
}
