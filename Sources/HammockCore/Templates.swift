import HammockJSON
import OrderedCollections

/// A string option with `{{ source.path }}` references in it, e.g.
/// `"https://api.github.com/users/{{ repo.owner.login }}"`.
public struct Template: Sendable, Hashable {
    public enum Part: Sendable, Hashable {
        case literal(String)
        case reference(TemplateReference)
    }

    public var parts: [Part]

    public var references: [TemplateReference] {
        parts.compactMap { if case .reference(let reference) = $0 { reference } else { nil } }
    }

    /// Parses `text`; `nil` when it holds no template at all.
    ///
    /// A reference is `{{ source }}` or `{{ source.key.0.key }}`: a source id, then keys or array indices
    /// joined by dots. Anything else between braces is an error rather than literal text, because a typo
    /// in a template would otherwise reach a server or a command unnoticed.
    public static func parse(_ text: String) throws(TemplateError) -> Template? {
        guard text.contains("{{") else { return nil }
        var parts: [Part] = []
        var rest = Substring(text)
        while let open = rest.firstRange(of: "{{") {
            if open.lowerBound > rest.startIndex { parts.append(.literal(String(rest[..<open.lowerBound]))) }
            guard let close = rest[open.upperBound...].firstRange(of: "}}") else {
                throw TemplateError("unclosed \"{{\" in template (expected \"}}\")")
            }
            let inner = rest[open.upperBound..<close.lowerBound].trimmingSpaces
            let segments = inner.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard let source = segments.first, !source.isEmpty,
                segments.allSatisfy({ !$0.isEmpty && $0.allSatisfy(isReferenceCharacter) })
            else {
                throw TemplateError(
                    "\"{{ \(inner) }}\" is not a reference; write {{ source }} or {{ source.key.0.key }}")
            }
            parts.append(.reference(TemplateReference(source: source, path: Array(segments.dropFirst()))))
            rest = rest[close.upperBound...]
        }
        if !rest.isEmpty { parts.append(.literal(String(rest))) }
        return Template(parts: parts)
    }

    /// Fills the template in from the sources' current content.
    ///
    /// - Parameter percentEncode: inside a URL a value is percent-encoded, so `a b/c` cannot change the
    ///   path or the query, and `..` cannot climb it (see `percentEncodedAsURLValue`). A reference that
    ///   opens the URL (`{{ repo.contributors_url }}/extra`) supplies its base (scheme, host, path) and is
    ///   inserted as it is.
    public func render(
        percentEncode: Bool, content: (SourceID) -> JSONValue?
    ) -> Result<String, TemplateResolutionProblem> {
        var text = ""
        for (index, part) in parts.enumerated() {
            switch part {
            case .literal(let literal):
                text += literal
            case .reference(let reference):
                guard let sourceContent = content(reference.sourceID) else {
                    return .failure(.inputMissing(reference.sourceID))
                }
                guard let value = sourceContent[reference.pointer] else {
                    return .failure(.noValue(reference))
                }
                let rendered = value.templateText
                text += percentEncode && index > 0 ? rendered.percentEncodedAsURLValue : rendered
            }
        }
        return .success(text)
    }
}

public struct TemplateReference: Sendable, Hashable, CustomStringConvertible {
    /// The first name: a source's id in an option's template; in a view's render template a source's id or
    /// one of the view's own names (`status`, `errors`…), so it stays text here and `sourceID` types it.
    public var source: String
    public var path: [String]

    public init(source: String, path: [String]) {
        self.source = source
        self.path = path
    }

    /// The source an option's template reads.
    public var sourceID: SourceID { SourceID(source) }
    public var pointer: JSONPointer { JSONPointer(tokens: path) }
    public var description: String { ([source] + path).joined(separator: ".") }
}

public struct TemplateError: Error, Sendable, Equatable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

public enum TemplateResolutionProblem: Error, Sendable, Equatable {
    /// The input source has no content yet: the dependent source waits.
    case inputMissing(SourceID)
    /// The input has content, but nothing at the path: the dependent source fails until the input changes.
    case noValue(TemplateReference)

    public var message: String {
        switch self {
        case .inputMissing(let source): "waiting for \"\(source)\", which has no content yet"
        case .noValue(let reference): "{{ \(reference) }} has no value in the content of \"\(reference.source)\""
        }
    }
}

/// A templated string inside a source's options.
public struct TemplatedOption: Sendable, Hashable {
    public var pointer: JSONPointer
    public var template: Template
    public var percentEncode: Bool

    public init(pointer: JSONPointer, template: Template, percentEncode: Bool) {
        self.pointer = pointer
        self.template = template
        self.percentEncode = percentEncode
    }
}

extension JSONValue {
    /// How a value reads inside a string: strings as they are, everything else as JSON.
    fileprivate var templateText: String {
        if case .string(let string) = self { return string }
        return jsonString
    }

    /// Replaces the value at `pointer`, which must exist.
    mutating func replace(at tokens: ArraySlice<String>, with newValue: JSONValue) {
        guard let token = tokens.first else {
            self = newValue
            return
        }
        switch self {
        case .object(var object):
            self = .null  // drop the second reference so the edit below does not copy the whole object
            object[token]?.replace(at: tokens.dropFirst(), with: newValue)
            self = .object(object)
        case .array(var array):
            self = .null
            if let index = Int(token), array.indices.contains(index) {
                array[index].replace(at: tokens.dropFirst(), with: newValue)
            }
            self = .array(array)
        default:
            break
        }
    }
}

private func isReferenceCharacter(_ character: Character) -> Bool {
    character.isASCII && (character.isLetter || character.isNumber || character == "_" || character == "-")
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var result = self
        while result.first == " " { result.removeFirst() }
        while result.last == " " { result.removeLast() }
        return result
    }
}

extension String {
    /// A value for the inside of a URL: `percentEncodedForURL`, and a value made of dots alone has every dot
    /// encoded too (`..` is `%2E%2E`).
    ///
    /// RFC 3986 leaves `.` unreserved, but a path segment that is `.` or `..` is resolved away by clients,
    /// proxies and servers: `/api/v1/{{ x }}/echo` with `..` would reach `/api/echo`. Only a value of dots
    /// alone can make such a segment (a `/` in it is encoded, and any other character makes the segment
    /// ordinary text), so `v1.2` and `a..b` stay readable. All its dots, not only an exact `.` or `..`: a
    /// dot written beside the template (`/.{{ x }}/`) could otherwise complete a `..`.
    public var percentEncodedAsURLValue: String {
        guard !isEmpty, utf8.allSatisfy({ $0 == UInt8(ascii: ".") }) else { return percentEncodedForURL }
        return String(repeating: "%2E", count: utf8.count)
    }

    /// RFC 3986 unreserved characters stay; every other byte is `%XX`, so a value can neither change a URL's
    /// path nor add a query parameter.
    public var percentEncodedForURL: String {
        var result = ""
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                result += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]], as: UTF8.self)
            }
        }
        return result
    }
}
