import OrderedCollections

/// Object members in the order they were received, so a line re-serialised by the engine
/// reads the same as the line a plugin wrote.
public typealias JSONObject = OrderedDictionary<String, JSONValue>

/// A JSON document or fragment.
///
/// Equality is structural and order-sensitive for objects (two objects with the same members
/// in a different order are not equal), and numbers compare by their literal text.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .number(JSONNumber(value)) }
    public init(floatLiteral value: Double) { self = .number(JSONNumber(value)) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }

    /// A repeated key keeps its first position and its last value, the same rule the parser applies.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var object = JSONObject(minimumCapacity: elements.count)
        for (key, value) in elements {
            object[key] = value
        }
        self = .object(object)
    }
}

extension JSONValue {
    /// The member named `key` when this is an object; nil for a missing member or any other kind.
    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    public var numberValue: JSONNumber? {
        if case .number(let value) = self { return value }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The kind with its article, so error messages can say "expected a string, got an array".
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

extension JSONValue: CustomStringConvertible {
    /// The compact JSON text, which is also what test failures and log lines should show.
    public var description: String { jsonString }
}
