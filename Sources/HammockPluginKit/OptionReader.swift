import HammockCore
import HammockJSON

/// Reads a source's options and collects every problem, so the user sees all of them at once, each at its
/// line in the YAML file (the engine maps the JSON Pointers back).
///
/// ```swift
/// var options = OptionReader(setup.options, known: ["path", "parse", "watch"], kind: "file")
/// let path = options.string("path", required: true)
/// let watch = options.bool("watch") ?? true
/// try options.finish()
/// ```
public struct OptionReader: Sendable {
    public let options: JSONObject
    public private(set) var problems: [OptionProblem] = []

    /// Reports every key not in `known`, with a did-you-mean when one is close.
    public init(_ options: JSONValue, known: [String], kind: String) {
        self.options = options.objectValue ?? [:]
        for key in self.options.keys where !known.contains(key) {
            // A key of every source reaches a plugin only when something other than hammock sent it (hammock
            // reads those itself): say so, rather than suggest the very key.
            let message =
                CommonSourceKey.names.contains(key)
                ? "\"\(key)\" is read by hammock, not by the \(kind) plugin; the engine that sent it should have kept it"
                : unknownKeyMessage(key, known: known + CommonSourceKey.names, context: "a \(kind) source")
            problems.append(OptionProblem(pointer: JSONPointer(tokens: [key]), message: message))
        }
    }

    public mutating func problem(_ key: String, _ message: String) {
        problems.append(OptionProblem(pointer: JSONPointer(tokens: [key]), message: message))
    }

    public mutating func problem(at pointer: JSONPointer, _ message: String) {
        problems.append(OptionProblem(pointer: pointer, message: message))
    }

    /// Throws the collected problems, if any.
    public func finish() throws(OptionProblems) {
        if !problems.isEmpty { throw OptionProblems(problems: problems) }
    }

    public func has(_ key: String) -> Bool { options[key] != nil }

    public mutating func value(_ key: String, required: Bool = false) -> JSONValue? {
        guard let value = options[key] else {
            if required { problem(key, "missing required key \"\(key)\"") }
            return nil
        }
        return value
    }

    public mutating func string(_ key: String, required: Bool = false) -> String? {
        guard let value = value(key, required: required) else { return nil }
        guard let text = value.stringValue else {
            problem(key, "\(key) must be a string, found \(value.kindName)")
            return nil
        }
        return text
    }

    public mutating func bool(_ key: String) -> Bool? {
        guard let value = value(key) else { return nil }
        guard let flag = value.boolValue else {
            problem(key, "\(key) must be true or false, found \(value.kindName)")
            return nil
        }
        return flag
    }

    /// A whole number of at least `minimum`. Also accepts sizes such as `10MiB` when `size` is true.
    /// A whole number in `minimum...maximum`; with `size`, also a size such as `64KiB`, at most
    /// `maximumSize` unless `maximum` says otherwise. Every number from outside has a range: a value at the
    /// edge of `Int` would overflow the first sum a plugin does with it.
    public mutating func integer(_ key: String, minimum: Int = 0, maximum: Int? = nil, size: Bool = false) -> Int? {
        guard let value = value(key) else { return nil }
        let maximum = maximum ?? (size ? Self.maximumSize : Int.max)
        let range = minimum...maximum
        if let number = value.numberValue?.intValue, range.contains(number) { return number }
        if size, let text = value.stringValue, let bytes = parseByteSize(text), range.contains(bytes) { return bytes }
        let limit = maximum == Int.max ? "of at least \(minimum)" : "from \(minimum) to \(maximum)"
        let sizeForm = size ? " (or a size such as 64KiB, 10MiB; at most \(maximum >> 20) MiB)" : ""
        problem(key, "\(key) must be a whole number \(limit)\(sizeForm)")
        return nil
    }

    /// The largest `maxBytes` and the like: 1 GiB, far above any content the 16 MiB protocol line can carry.
    public static let maximumSize = 1 << 30

    public mutating func duration(_ key: String) -> Duration? {
        guard let value = value(key) else { return nil }
        guard let text = value.stringValue else {
            problem(key, "\(key) must be a duration such as 5s, found \(value.kindName)")
            return nil
        }
        switch parseDuration(text) {
        case .success(let duration): return duration
        case .failure(let failure):
            problem(key, "\(key): \(failure.message)")
            return nil
        }
    }

    /// One of a fixed set of words.
    public mutating func choice(_ key: String, _ choices: [String]) -> String? {
        guard let text = string(key) else { return nil }
        guard choices.contains(text) else {
            let hint = didYouMean(text, among: choices)
            problem(key, "\(key) must be one of \(choices.joined(separator: ", ")), found \"\(text)\"\(hint)")
            return nil
        }
        return text
    }

    public mutating func stringList(_ key: String, required: Bool = false, nonEmpty: Bool = true) -> [String]? {
        guard let value = value(key, required: required) else { return nil }
        guard let items = value.arrayValue else {
            problem(key, "\(key) must be a list of strings, found \(value.kindName)")
            return nil
        }
        var strings: [String] = []
        for (index, item) in items.enumerated() {
            guard let text = item.stringValue else {
                problem(at: JSONPointer(tokens: [key, String(index)]), "\(key)[\(index)] must be a string, found \(item.kindName)")
                continue
            }
            strings.append(text)
        }
        if nonEmpty && items.isEmpty { problem(key, "\(key) must not be empty") }
        return strings.count == items.count ? strings : nil
    }

    /// A mapping of names to strings (numbers and booleans are taken as their text).
    public mutating func stringMap(_ key: String) -> [(String, String)]? {
        guard let value = value(key) else { return nil }
        guard let object = value.objectValue else {
            problem(key, "\(key) must be a mapping of names to values, found \(value.kindName)")
            return nil
        }
        var pairs: [(String, String)] = []
        for (name, item) in object {
            switch item {
            case .string(let text): pairs.append((name, text))
            case .number(let number): pairs.append((name, number.text))
            case .bool(let flag): pairs.append((name, flag ? "true" : "false"))
            default: problem(at: JSONPointer(tokens: [key, name]), "\(key).\(name) must be a string, found \(item.kindName)")
            }
        }
        return pairs
    }
}

/// `512`, `64KiB`, `10MiB`, `1GiB` (and KB/MB/GB as powers of 1000).
public func parseByteSize(_ text: String) -> Int? {
    let digits = text.prefix { $0.isNumber }
    guard let number = Int(digits) else { return nil }
    let units: [String: Int] = [
        "": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 1000, "MB": 1_000_000, "GB": 1_000_000_000,
    ]
    guard let scale = units[text.dropFirst(digits.count).trimmingPrefix(" ").description] else { return nil }
    let (bytes, overflow) = number.multipliedReportingOverflow(by: scale)
    return overflow ? nil : bytes
}
