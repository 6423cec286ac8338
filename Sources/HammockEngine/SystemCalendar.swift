import Glibc
import HammockCore

/// The machine's local time (`TZ`, else `/etc/localtime`), through the C library's `localtime_r` and
/// `mktime`, for `at:` schedules: summer time and its changes as the system's time zone database has them.
struct SystemCalendar: LocalCalendar {
    init() {
        tzset()
    }

    func fields(of time: Timestamp) -> LocalFields {
        var seconds = time_t(Self.floorDivide(time.millisecondsSince1970, 1000))
        var parts = tm()
        localtime_r(&seconds, &parts)
        return LocalFields(
            year: Int(parts.tm_year) + 1900, month: Int(parts.tm_mon) + 1, day: Int(parts.tm_mday), hour: Int(parts.tm_hour),
            minute: Int(parts.tm_min))
    }

    /// `mktime` with the summer time left to it: a time the clock repeats is taken once (the C library
    /// picks one of the two), and one it skips moves forward by the change (02:30 on the night clocks go
    /// forward is 03:30).
    func timestamp(of fields: LocalFields) -> Timestamp {
        var parts = tm()
        parts.tm_year = Int32(fields.year - 1900)
        parts.tm_mon = Int32(fields.month - 1)
        parts.tm_mday = Int32(fields.day)
        parts.tm_hour = Int32(fields.hour)
        parts.tm_min = Int32(fields.minute)
        parts.tm_isdst = -1
        let seconds = mktime(&parts)
        return Timestamp(millisecondsSince1970: Int64(seconds) * 1000)
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
        a >= 0 ? a / b : -((-a + b - 1) / b)
    }
}
