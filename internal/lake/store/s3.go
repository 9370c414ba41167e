package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/sync/errgroup"

	"github.com/omlhq/oml/internal/backoff"
)

// S3Config configures an S3 store. Only Bucket is required; everything else
// has a default, and endpoint, region and credentials come from the standard
// AWS environment (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION,
// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, profiles, instance roles) unless
// set here.
type S3Config struct {
	Bucket string
	Prefix string // key prefix inside the bucket, without leading or trailing '/'

	// Endpoint, Region and static credentials override the environment.
	Endpoint        string
	Region          string
	AccessKeyID     string
	SecretAccessKey string

	// PartSize is the multipart part size (default 8 MiB, at least 5 MiB);
	// bodies larger than MultipartThreshold (default 16 MiB) are uploaded in
	// parts, PartConcurrency (default 4) at a time.
	PartSize           int64
	MultipartThreshold int64
	PartConcurrency    int

	// RequestTimeout bounds each attempt: the wait for response headers, any
	// stall while reading a body, and a whole put-if-absent request
	// (default 30s).
	RequestTimeout time.Duration
	// MaxAttempts bounds the attempts per request, including the first
	// (default 5); MaxBackoff caps the jittered exponential backoff between
	// them (default 5s).
	MaxAttempts int
	MaxBackoff  time.Duration
}

// Defaults for S3Config.
const (
	DefaultPartSize           = 8 << 20
	DefaultMultipartThreshold = 16 << 20
	minPartSize               = 5 << 20
	maxParts                  = 10000 // S3's limit per multipart upload
)

func (c *S3Config) setDefaults() {
	if c.PartSize <= 0 {
		c.PartSize = DefaultPartSize
	}
	if c.PartSize < minPartSize {
		c.PartSize = minPartSize
	}
	if c.MultipartThreshold <= 0 {
		c.MultipartThreshold = DefaultMultipartThreshold
	}
	if c.PartConcurrency <= 0 {
		c.PartConcurrency = 4
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 5 * time.Second
	}
}

// S3 is the S3 backend. Every request is signed with SigV4 and retried by
// the SDK's standard retryer (jittered exponential backoff, bounded attempts,
// no client-side retry quota), except PutIfAbsent, which runs its own retry
// loop because a blind retry of a conditional write can turn "I won" into
// "someone else won" (see PutIfAbsent).
type S3 struct {
	client *s3.Client
	cfg    S3Config
	prefix string // "" or "p/"
}

var _ Store = (*S3)(nil)

// OpenS3 opens an S3 store. It does not contact the server; the first
// operation does (use Probe to check access and conditional-write support).
func OpenS3(ctx context.Context, cfg S3Config) (*S3, error) {
	if cfg.MaxAttempts <= 0 {
		// The standard AWS setting, which the explicit retryer would
		// otherwise override.
		if n, err := strconv.Atoi(os.Getenv("AWS_MAX_ATTEMPTS")); err == nil && n > 0 {
			cfg.MaxAttempts = n
		}
	}
	cfg.setDefaults()
	if err := validBucket(cfg.Bucket); err != nil {
		return nil, err
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	if cfg.Prefix != "" {
		if err := ValidateKey(cfg.Prefix); err != nil {
			return nil, fmt.Errorf("s3://%s/%s: the prefix is not a valid key prefix: %w", cfg.Bucket, cfg.Prefix, err)
		}
	}
	httpClient := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = 10 * time.Second }).
		WithTransportOptions(func(tr *http.Transport) {
			tr.ResponseHeaderTimeout = cfg.RequestTimeout
			tr.MaxIdleConnsPerHost = 64
		}).
		WithReadTimeout(cfg.RequestTimeout)
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = cfg.MaxAttempts
				o.MaxBackoff = cfg.MaxBackoff
				o.Backoff = retry.NewExponentialJitterBackoff(cfg.MaxBackoff)
				// The token-bucket quota would turn an outage into
				// "retry quota exceeded" errors; attempts are bounded anyway.
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3://%s: loading the AWS configuration failed: %w", cfg.Bucket, err)
	}
	if awsCfg.Region == "" {
		return nil, fmt.Errorf("s3://%s: no AWS region is configured: set AWS_REGION (for a local S3-compatible server, the region it was started with)", cfg.Bucket)
	}
	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL_S3")
	}
	if endpoint == "" && awsCfg.BaseEndpoint != nil {
		endpoint = *awsCfg.BaseEndpoint // AWS_ENDPOINT_URL or the config file
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		// Objects written by other tools may carry no checksum; that is
		// not worth a log line per GET.
		o.DisableLogOutputChecksumValidationSkipped = true
		if endpoint != "" {
			// Custom endpoints (gateways, local servers) rarely have
			// wildcard DNS for virtual-hosted buckets.
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
	})
	s := &S3{client: client, cfg: cfg}
	if cfg.Prefix != "" {
		s.prefix = cfg.Prefix + "/"
	}
	return s, nil
}

func validBucket(b string) error {
	if b == "" {
		return fmt.Errorf("the S3 bucket name is empty: write s3://bucket/prefix")
	}
	if len(b) < 3 || len(b) > 63 || strings.Trim(b, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
		return fmt.Errorf("%q is not a valid S3 bucket name (3-63 lowercase letters, digits, '.' and '-')", b)
	}
	return nil
}

// Client returns the underlying SDK client (for test harnesses).
func (s *S3) Client() *s3.Client { return s.client }

// Bucket returns the bucket name.
func (s *S3) Bucket() string { return s.cfg.Bucket }

func (s *S3) String() string {
	if s.prefix == "" {
		return "s3://" + s.cfg.Bucket
	}
	return "s3://" + s.cfg.Bucket + "/" + s.cfg.Prefix
}

func (s *S3) full(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return s.prefix + key, nil
}

func (s *S3) wrap(op OpKind, key string, err error) error {
	if ce := s.configError(err); ce != nil {
		return ce
	}
	if isNotFound(err) {
		return fmt.Errorf("%s: %s %q: %w", s, op, key, ErrNotFound)
	}
	return fmt.Errorf("%s: %s %q: %w", s, op, key, err)
}

// configError recognizes a refusal that no retry can fix (ErrConfig).
func (s *S3) configError(err error) error {
	var problem string
	switch code := apiCode(err); code {
	case "InvalidAccessKeyId", "XAdminUserNotFound": // the second: Versity Gateway's answer (HTTP 404)
		problem = "the server does not know the access key id (" + code + "): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
	case "SignatureDoesNotMatch":
		problem = "the server rejected the request signature (SignatureDoesNotMatch): check AWS_SECRET_ACCESS_KEY"
	case "ExpiredToken", "InvalidToken", "TokenRefreshRequired":
		problem = "the server rejected the session token (" + code + "): refresh the credentials"
	case "NoSuchBucket":
		problem = "the bucket " + s.cfg.Bucket + " does not exist (NoSuchBucket): create it or fix the lake URL"
	case "AuthorizationHeaderMalformed":
		problem = "the server rejected the request's region (AuthorizationHeaderMalformed): set AWS_REGION to the bucket's region"
	case "AccessDenied", "AllAccessDisabled", "AccountProblem", "InvalidBucketName":
		problem = "the server refused access (" + code + "): check that the credentials may read and write the bucket"
	default:
		if httpStatus(err) != http.StatusForbidden {
			return nil
		}
		problem = "the server refused access (HTTP 403): check the credentials and that they may read and write the bucket"
	}
	return &ConfigError{Store: s.String(), Problem: problem, Err: err}
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	return errors.As(err, &nsk) || errors.As(err, &nf) || httpStatus(err) == http.StatusNotFound && apiCode(err) != "NoSuchBucket"
}

func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	k, err := s.full(key)
	if err != nil {
		return nil, err
	}
	var data []byte
	err = s.retryBody(ctx, func() error {
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: &k})
		if err != nil {
			return err // already retried by the SDK
		}
		defer out.Body.Close()
		var buf bytes.Buffer
		if out.ContentLength != nil && *out.ContentLength > 0 {
			buf.Grow(int(*out.ContentLength))
		}
		if _, err := buf.ReadFrom(out.Body); err != nil {
			return &bodyError{err}
		}
		data = buf.Bytes()
		return nil
	})
	if err != nil {
		return nil, s.wrap(OpGet, key, err)
	}
	return data, nil
}

// bodyError marks a failure while streaming a response body (a reset or a
// stall), which the SDK's retryer never sees because it happens after the
// operation returned.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "reading the response body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// retryBody runs a read, retrying it (jittered backoff, bounded attempts)
// when streaming its body failed; reads are idempotent.
func (s *S3) retryBody(ctx context.Context, read func() error) error {
	for attempt := 1; ; attempt++ {
		err := read()
		var be *bodyError
		if err == nil || !errors.As(err, &be) || attempt >= s.cfg.MaxAttempts || ctx.Err() != nil {
			return err
		}
		if err := sleepBackoff(ctx, attempt, s.cfg.MaxBackoff); err != nil {
			return err
		}
	}
}

func (s *S3) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	k, err := s.full(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: &k})
	if err != nil {
		return ObjectInfo{}, s.wrap(OpStat, key, err)
	}
	return ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// s3Object reads ranges of one object version: every ranged GET carries
// If-Match with the ETag seen at Open, so an object replaced while being
// read fails loudly instead of mixing two versions. Reads are bounded by the
// context given to Open.
type s3Object struct {
	s    *S3
	ctx  context.Context
	key  string // full key
	rel  string
	etag *string
	size int64
}

func (s *S3) Open(ctx context.Context, key string) (Object, error) {
	k, err := s.full(key)
	if err != nil {
		return nil, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: &k})
	if err != nil {
		return nil, s.wrap(OpOpen, key, err)
	}
	return &s3Object{s: s, ctx: ctx, key: k, rel: key, etag: out.ETag, size: aws.ToInt64(out.ContentLength)}, nil
}

func (o *s3Object) Size() int64  { return o.size }
func (o *s3Object) Close() error { return nil }

func (o *s3Object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: read %q: negative offset %d", o.s, o.rel, off)
	}
	if off >= o.size {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	end := min(off+int64(len(p)), o.size) // exclusive
	rng := fmt.Sprintf("bytes=%d-%d", off, end-1)
	var n int
	err := o.s.retryBody(o.ctx, func() error {
		out, err := o.s.client.GetObject(o.ctx, &s3.GetObjectInput{Bucket: &o.s.cfg.Bucket, Key: &o.key, Range: &rng, IfMatch: o.etag})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		n, err = io.ReadFull(out.Body, p[:end-off])
		if err != nil {
			return &bodyError{err}
		}
		return nil
	})
	if err != nil {
		if httpStatus(err) == http.StatusPreconditionFailed {
			return 0, fmt.Errorf("%s: read %q: the object was replaced while it was being read; reopen it", o.s, o.rel)
		}
		if isNotFound(err) {
			return 0, o.s.wrap(OpOpen, o.rel, err)
		}
		return 0, fmt.Errorf("%s: read %q at %d: %w", o.s, o.rel, off, err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Put uploads key whole: one PutObject up to MultipartThreshold, else a
// multipart upload, which S3 makes visible only at CompleteMultipartUpload
// (and which is aborted on any failure). Either way readers see the old
// object or the whole new one. Put is idempotent, so the SDK retries it.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	r = orEmpty(r)
	k, err := s.full(key)
	if err != nil {
		return err
	}
	r = ctxReader{ctx: ctx, r: r}
	if size >= 0 && size <= s.cfg.MultipartThreshold {
		// Known small size: one exact buffer, one request.
		body := make([]byte, size)
		if _, err := io.ReadFull(r, body); err != nil {
			return s.wrap(OpPut, key, fmt.Errorf("reading the body (%d bytes expected): %w", size, err))
		}
		var extra [1]byte
		if n, _ := io.ReadFull(r, extra[:]); n > 0 {
			return s.wrap(OpPut, key, fmt.Errorf("the body is longer than the %d bytes expected", size))
		}
		return s.putSingle(ctx, key, k, body)
	}
	// Unknown or large size: read up to the threshold; a body that ends
	// there still goes in one request.
	var first bytes.Buffer
	n, err := first.ReadFrom(io.LimitReader(r, s.cfg.MultipartThreshold+1))
	if err != nil {
		return s.wrap(OpPut, key, fmt.Errorf("reading the body: %w", err))
	}
	if n <= s.cfg.MultipartThreshold {
		if size >= 0 && n != size {
			return s.wrap(OpPut, key, fmt.Errorf("the body had %d bytes, expected %d", n, size))
		}
		return s.putSingle(ctx, key, k, first.Bytes())
	}
	return s.putMultipart(ctx, key, k, io.MultiReader(&first, r), size)
}

func (s *S3) putSingle(ctx context.Context, key, k string, body []byte) error {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.cfg.Bucket, Key: &k, Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		return s.wrap(OpPut, key, err)
	}
	return nil
}

func (s *S3) putMultipart(ctx context.Context, key, k string, r io.Reader, size int64) (err error) {
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.cfg.Bucket, Key: &k})
	if err != nil {
		return s.wrap(OpPut, key, fmt.Errorf("starting a multipart upload: %w", err))
	}
	defer func() {
		if err != nil {
			// Abort so the parts do not linger (and cost) on the server;
			// best effort, even if ctx is already done.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
			defer cancel()
			s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &s.cfg.Bucket, Key: &k, UploadId: up.UploadId}) //nolint:errcheck
		}
	}()

	var (
		mu    sync.Mutex
		parts []types.CompletedPart
		total int64
		pool  = sync.Pool{New: func() any { b := make([]byte, s.cfg.PartSize); return &b }}
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.PartConcurrency)
	for num := int32(1); ; num++ {
		bufp := pool.Get().(*[]byte)
		n, rerr := io.ReadFull(r, *bufp)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			pool.Put(bufp)
			_ = g.Wait()
			return s.wrap(OpPut, key, fmt.Errorf("reading the body: %w", rerr))
		}
		if n == 0 {
			pool.Put(bufp)
			break
		}
		if num > maxParts {
			pool.Put(bufp)
			_ = g.Wait()
			return s.wrap(OpPut, key, fmt.Errorf("the body needs more than %d parts of %d bytes; raise the part size", maxParts, s.cfg.PartSize))
		}
		total += int64(n)
		g.Go(func() error {
			defer pool.Put(bufp)
			out, err := s.client.UploadPart(gctx, &s3.UploadPartInput{
				Bucket: &s.cfg.Bucket, Key: &k, UploadId: up.UploadId, PartNumber: aws.Int32(num),
				Body: bytes.NewReader((*bufp)[:n]), ContentLength: aws.Int64(int64(n)),
			})
			if err != nil {
				return fmt.Errorf("uploading part %d: %w", num, err)
			}
			mu.Lock()
			parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
			mu.Unlock()
			return nil
		})
		if rerr != nil { // EOF after a short part
			break
		}
		if gctx.Err() != nil {
			break
		}
	}
	if err := g.Wait(); err != nil {
		return s.wrap(OpPut, key, err)
	}
	if err := ctx.Err(); err != nil {
		return s.wrap(OpPut, key, err)
	}
	if size >= 0 && total != size {
		return s.wrap(OpPut, key, fmt.Errorf("the body had %d bytes, expected %d", total, size))
	}
	sortParts(parts)
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &s.cfg.Bucket, Key: &k, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		// A retried Complete whose first attempt succeeded answers
		// NoSuchUpload; the object is there if it has our size (data files
		// have unique names, so no one else writes this key).
		if apiCode(err) == "NoSuchUpload" {
			if info, herr := s.Stat(ctx, key); herr == nil && info.Size == total {
				return nil
			}
		}
		return s.wrap(OpPut, key, fmt.Errorf("completing the multipart upload: %w", err))
	}
	return nil
}

func sortParts(parts []types.CompletedPart) {
	slices.SortFunc(parts, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })
}

// PutIfAbsent is PutObject with If-None-Match: *. It retries only attempts
// that certainly did not write:
//
//   - the request never reached the wire, or the connection could not be
//     dialed;
//   - 503 (SlowDown) and 429 throttling answers, which S3 gives before doing
//     anything;
//   - 409 ConditionalRequestConflict, which S3 gives when another conditional
//     write of the same key is in flight: ours was not applied, so the
//     outcome is decided by reading back — if the key now exists someone else
//     won (ErrExists); if not, the other write failed and we try again.
//
// 412 PreconditionFailed means the key exists: ErrExists. Since no earlier
// attempt can have written (see above), a 412 is never our own write.
//
// Anything else that leaves the outcome unknown — a timeout or a lost
// connection after the request was sent, a 500/502/504 — returns an error
// wrapping ErrAmbiguous without retrying: a retry could answer 412 for our
// own write and report a win as a loss. The Delta layer resolves an
// ambiguous commit by reading the key back and comparing it with what it
// wrote.
func (s *S3) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	k, err := s.full(key)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return s.wrap(OpPutIfAbsent, key, err) // nothing sent yet
		}
		var sent atomic.Bool
		actx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		_, err := s.client.PutObject(actx, &s3.PutObjectInput{
			Bucket: &s.cfg.Bucket, Key: &k, Body: bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))), IfNoneMatch: aws.String("*"),
		}, func(o *s3.Options) {
			o.Retryer = aws.NopRetryer{}
			o.APIOptions = append(o.APIOptions, markSent(&sent))
		})
		cancel()
		if err == nil {
			return nil
		}
		status := httpStatus(err)
		retryable := false
		switch {
		case status == http.StatusPreconditionFailed || apiCode(err) == "PreconditionFailed":
			return fmt.Errorf("%s: put-if-absent %q: %w", s, key, ErrExists)
		case status == http.StatusConflict:
			_, herr := s.Stat(ctx, key)
			if herr == nil {
				return fmt.Errorf("%s: put-if-absent %q: a concurrent conditional write won: %w", s, key, ErrExists)
			}
			if !errors.Is(herr, ErrNotFound) {
				return fmt.Errorf("%s: put-if-absent %q: lost a conditional-write conflict (409) and could not read the key back (%v); the write was not applied", s, key, herr)
			}
			retryable = true
		case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
			retryable = true
		case status != 0 && status < 500:
			// A definite refusal (403, 400, 404 NoSuchBucket...): not applied.
			return s.wrap(OpPutIfAbsent, key, err)
		case status == 0 && (!sent.Load() || isDialError(err)):
			retryable = true // never reached the server
		default:
			return fmt.Errorf("%s: put-if-absent %q: the outcome is unknown (%v); read the key back to learn whether this write landed: %w", s, key, err, ErrAmbiguous)
		}
		if !retryable || attempt >= s.cfg.MaxAttempts {
			return fmt.Errorf("%s: put-if-absent %q: not applied after %d attempts: %w", s, key, attempt, err)
		}
		if err := sleepBackoff(ctx, attempt, s.cfg.MaxBackoff); err != nil {
			return s.wrap(OpPutIfAbsent, key, err)
		}
	}
}

// markSent records that a request reached the transport (the last
// deserialize-step middleware runs right before the HTTP round trip).
func markSent(sent *atomic.Bool) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("omlMarkSent",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				sent.Store(true)
				return next.HandleDeserialize(ctx, in)
			}), middleware.After)
	}
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// sleepBackoff waits a full-jitter exponential backoff: uniform in
// [0, min(max, 50ms * 2^attempt)), plus a millisecond.
func sleepBackoff(ctx context.Context, attempt int, maxBackoff time.Duration) error {
	return backoff.Policy{Min: 50 * time.Millisecond, Max: maxBackoff, Jitter: backoff.Full}.Wait(ctx, attempt)
}

func (s *S3) List(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	in := &s3.ListObjectsV2Input{Bucket: &s.cfg.Bucket, Prefix: aws.String(s.prefix + prefix)}
	if startAfter != "" {
		in.StartAfter = aws.String(s.prefix + startAfter)
	}
	var out []ObjectInfo
	p := s3.NewListObjectsV2Paginator(s.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			if ce := s.configError(err); ce != nil {
				return nil, ce
			}
			return nil, fmt.Errorf("%s: list %q: %w", s, prefix, err)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if strings.HasSuffix(k, "/") || !strings.HasPrefix(k, s.prefix) {
				continue // a directory marker, not an object
			}
			out = append(out, ObjectInfo{Key: k[len(s.prefix):], Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
	}
	return out, nil
}

func (s *S3) Delete(ctx context.Context, key string) error {
	k, err := s.full(key)
	if err != nil {
		return err
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: &k})
	if err != nil && !isNotFound(err) {
		return s.wrap(OpDelete, key, err)
	}
	return nil
}

// anyUnder is one ListObjectsV2 of at most one key. A directory marker
// (a key ending in '/', which List skips) counts as something, so the
// answer errs towards reading.
func (s *S3) anyUnder(ctx context.Context, prefix string) (bool, bool, error) {
	out, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
		Bucket: &s.cfg.Bucket, Prefix: aws.String(s.prefix + prefix), MaxKeys: aws.Int32(1),
	})
	if err != nil {
		if ce := s.configError(err); ce != nil {
			return true, false, ce
		}
		return true, false, fmt.Errorf("%s: list %q: %w", s, prefix, err)
	}
	return len(out.Contents) > 0 || aws.ToBool(out.IsTruncated), true, nil
}
