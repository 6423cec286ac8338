import OrderedCollections

/// Encodes an `Encodable` value as a `JSONValue`: object members in the order they were encoded (a
/// synthesized `encode(to:)` encodes in declaration order), numbers as their exact text, a `JSONValue` or
/// `JSONNumber` inside the value copied as it is. `encodeIfPresent` leaves a nil member out; `encode` of a
/// nil optional writes `null`.
public struct JSONValueEncoder: Sendable {
    public init() {}

    /// Throws `EncodingError.invalidValue` for a NaN or infinite floating-point value (JSON has none), for a
    /// value that encodes nothing, and whatever the value's own `encode(to:)` throws.
    public func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        if let json = value as? JSONValue { return json }
        let root = EncodingNode()
        try value.encode(to: ValueEncoder(node: root, codingPath: []))
        guard let encoded = root.finished else {
            throw EncodingError.invalidValue(
                value, EncodingError.Context(codingPath: [], debugDescription: "\(T.self) encoded nothing"))
        }
        return encoded
    }
}

/// What one encoder or container writes into. A reference, because a container handed out earlier must
/// keep writing into the same object or array; `finished` turns the tree into a value once, at the end.
final class EncodingNode {
    enum Member {
        case value(JSONValue)
        case node(EncodingNode)

        var finished: JSONValue {
            switch self {
            case .value(let value): value
            case .node(let node): node.finished ?? .object([:])  // a nested encoder given nothing, as JSONEncoder does
            }
        }
    }

    enum Content {
        case empty
        case single(JSONValue)
        case object(OrderedDictionary<String, Member>)
        case array([Member])
    }

    var content = Content.empty

    var finished: JSONValue? {
        switch content {
        case .empty: nil
        case .single(let value): value
        case .object(let members): .object(members.mapValues(\.finished))
        case .array(let elements): .array(elements.map(\.finished))
        }
    }

    func becomeObject() {
        switch content {
        case .object: return
        case .empty, .single: content = .object([:])  // as JSONEncoder: a container replaces a single value
        case .array: preconditionFailure("asked for a keyed container where an unkeyed one was already used")
        }
    }

    func becomeArray() {
        switch content {
        case .array: return
        case .empty, .single: content = .array([])
        case .object: preconditionFailure("asked for an unkeyed container where a keyed one was already used")
        }
    }

    /// A repeated key keeps its first position and takes the new value, as `JSONObject` does.
    func set(_ key: String, _ member: Member) {
        guard case .object(var members) = content else { preconditionFailure("not an object") }
        content = .empty  // so the dictionary is uniquely referenced and updated in place
        members[key] = member
        content = .object(members)
    }

    func append(_ member: Member) {
        guard case .array(var elements) = content else { preconditionFailure("not an array") }
        content = .empty
        elements.append(member)
        content = .array(elements)
    }

    var count: Int {
        if case .array(let elements) = content { return elements.count }
        return 0
    }
}

struct ValueEncoder: Encoder {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        node.becomeObject()
        return KeyedEncodingContainer(KeyedContainer<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        node.becomeArray()
        return UnkeyedContainer(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueContainer(node: node, codingPath: codingPath)
    }

    /// The member `value` becomes: a scalar or a `JSONValue` directly, anything else through its `encode(to:)`.
    static func member<T: Encodable>(_ value: T, at path: [any CodingKey]) throws -> EncodingNode.Member {
        if let json = value as? JSONValue { return .value(json) }
        if let number = value as? JSONNumber { return .value(.number(number)) }
        let child = EncodingNode()
        try value.encode(to: ValueEncoder(node: child, codingPath: path))
        if case .single(let scalar) = child.content { return .value(scalar) }
        return .node(child)
    }

    static func number<T: BinaryFloatingPoint>(_ value: T, at path: [any CodingKey]) throws -> JSONValue {
        guard let number = JSONNumber(exactly: Double(value)) else {
            throw EncodingError.invalidValue(
                value, EncodingError.Context(codingPath: path, debugDescription: "\(value) is not a JSON number"))
        }
        return .number(number)
    }

    static func number<T: FixedWidthInteger>(_ value: T) -> JSONValue {
        .number(JSONNumber(uncheckedText: String(value)))
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    private func path(_ key: Key) -> [any CodingKey] { codingPath + [key] }
    private func set(_ value: JSONValue, _ key: Key) { node.set(key.stringValue, .value(value)) }

    mutating func encodeNil(forKey key: Key) throws { set(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { set(try ValueEncoder.number(value, at: path(key)), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { set(try ValueEncoder.number(value, at: path(key)), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(ValueEncoder.number(value), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(ValueEncoder.number(value), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(ValueEncoder.number(value), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(ValueEncoder.number(value), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(ValueEncoder.number(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(ValueEncoder.number(value), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(ValueEncoder.number(value), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(ValueEncoder.number(value), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(ValueEncoder.number(value), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(ValueEncoder.number(value), key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        node.set(key.stringValue, try ValueEncoder.member(value, at: path(key)))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        let child = EncodingNode()
        child.becomeObject()
        node.set(key.stringValue, .node(child))
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(node: child, codingPath: path(key)))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = EncodingNode()
        child.becomeArray()
        node.set(key.stringValue, .node(child))
        return UnkeyedContainer(node: child, codingPath: path(key))
    }

    mutating func superEncoder() -> any Encoder { superEncoder(named: JSONCodingKey(stringValue: "super")) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key) }

    private func superEncoder(named key: any CodingKey) -> any Encoder {
        let child = EncodingNode()
        node.set(key.stringValue, .node(child))
        return ValueEncoder(node: child, codingPath: codingPath + [key])
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    var count: Int { node.count }

    private var nextPath: [any CodingKey] { codingPath + [JSONCodingKey(intValue: count)] }
    private func append(_ value: JSONValue) { node.append(.value(value)) }

    mutating func encodeNil() throws { append(.null) }
    mutating func encode(_ value: Bool) throws { append(.bool(value)) }
    mutating func encode(_ value: String) throws { append(.string(value)) }
    mutating func encode(_ value: Double) throws { append(try ValueEncoder.number(value, at: nextPath)) }
    mutating func encode(_ value: Float) throws { append(try ValueEncoder.number(value, at: nextPath)) }
    mutating func encode(_ value: Int) throws { append(ValueEncoder.number(value)) }
    mutating func encode(_ value: Int8) throws { append(ValueEncoder.number(value)) }
    mutating func encode(_ value: Int16) throws { append(ValueEncoder.number(value)) }
    mutating func encode(_ value: Int32) throws { append(ValueEncoder.number(value)) }
    mutating func encode(_ value: Int64) throws { append(ValueEncoder.number(value)) }
    mutating func encode(_ value: UInt) throws { append(ValueEncoder.number(value)) }
    mutating func encode(_ value: UInt8) throws { append(ValueEncoder.number(value)) }
    mutating func encode(_ value: UInt16) throws { append(ValueEncoder.number(value)) }
    mutating func encode(_ value: UInt32) throws { append(ValueEncoder.number(value)) }
    mutating func encode(_ value: UInt64) throws { append(ValueEncoder.number(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        node.append(try ValueEncoder.member(value, at: nextPath))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let child = EncodingNode()
        child.becomeObject()
        let path = nextPath
        node.append(.node(child))
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(node: child, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let child = EncodingNode()
        child.becomeArray()
        let path = nextPath
        node.append(.node(child))
        return UnkeyedContainer(node: child, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let child = EncodingNode()
        let path = nextPath
        node.append(.node(child))
        return ValueEncoder(node: child, codingPath: path)
    }
}

private struct SingleValueContainer: SingleValueEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    private func set(_ value: JSONValue) { node.content = .single(value) }

    mutating func encodeNil() throws { set(.null) }
    mutating func encode(_ value: Bool) throws { set(.bool(value)) }
    mutating func encode(_ value: String) throws { set(.string(value)) }
    mutating func encode(_ value: Double) throws { set(try ValueEncoder.number(value, at: codingPath)) }
    mutating func encode(_ value: Float) throws { set(try ValueEncoder.number(value, at: codingPath)) }
    mutating func encode(_ value: Int) throws { set(ValueEncoder.number(value)) }
    mutating func encode(_ value: Int8) throws { set(ValueEncoder.number(value)) }
    mutating func encode(_ value: Int16) throws { set(ValueEncoder.number(value)) }
    mutating func encode(_ value: Int32) throws { set(ValueEncoder.number(value)) }
    mutating func encode(_ value: Int64) throws { set(ValueEncoder.number(value)) }
    mutating func encode(_ value: UInt) throws { set(ValueEncoder.number(value)) }
    mutating func encode(_ value: UInt8) throws { set(ValueEncoder.number(value)) }
    mutating func encode(_ value: UInt16) throws { set(ValueEncoder.number(value)) }
    mutating func encode(_ value: UInt32) throws { set(ValueEncoder.number(value)) }
    mutating func encode(_ value: UInt64) throws { set(ValueEncoder.number(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        switch try ValueEncoder.member(value, at: codingPath) {
        case .value(let scalar): set(scalar)
        case .node(let child): node.content = child.content
        }
    }
}

/// A coding key for array positions, `super`, and objects whose keys are only known at run time.
public struct JSONCodingKey: CodingKey, Sendable, Hashable {
    public let stringValue: String
    public let intValue: Int?

    public init(stringValue: String) {
        self.stringValue = stringValue
        self.intValue = nil
    }

    public init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }
}
