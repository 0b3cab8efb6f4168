package storage

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"
	gcaws "gocloud.dev/aws"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
)

// LogFunc receives what a store's client library would otherwise print on its own (the AWS
// SDK writes its warnings, such as a response without a checksum to validate, as plain text to
// standard error), so that a service logs it in its own format. level is the library's
// classification ("WARN", "DEBUG").
type LogFunc func(level, msg string)

// WithLog routes the client library's own log lines of an s3:// store to log. Other schemes
// print nothing of their own and ignore it.
func WithLog(log LogFunc) Option { return func(o *openOptions) { o.log = log } }

// openS3 opens an s3:// bucket with the parameters gocloud's s3blob URL opener takes (its own:
// ssetype, kmskeyid, accelerate, disable_https, use_path_style or s3ForcePathStyle; the rest are
// the AWS configuration's: region, endpoint, profile, …), building the client here so that the
// SDK's logger can be set.
//
// exists asks S3 whether the bucket is there (HeadBucket): a listing cannot tell, since some
// S3 servers answer a listing of an empty prefix with NoSuchBucket.
func openS3(ctx context.Context, bucket string, q url.Values, log LogFunc) (b *blob.Bucket, exists func(context.Context) (bool, error), err error) {
	q = cloneValues(q)
	var opts s3blob.Options
	if v := take(q, "ssetype"); v != "" {
		sse, err := sseType(v)
		if err != nil {
			return nil, nil, err
		}
		opts.EncryptionType = sse
	}
	opts.KMSEncryptionID = take(q, "kmskeyid")
	var clientOpts []func(*s3.Options)
	for _, flag := range []struct {
		keys []string
		set  func(*s3.Options, bool)
	}{
		{[]string{"accelerate"}, func(o *s3.Options, v bool) { o.UseAccelerate = v }},
		{[]string{"disable_https"}, func(o *s3.Options, v bool) { o.EndpointOptions.DisableHTTPS = v }},
		{[]string{"use_path_style", "s3ForcePathStyle"}, func(o *s3.Options, v bool) { o.UsePathStyle = v }},
	} {
		for _, key := range flag.keys {
			raw := take(q, key)
			if raw == "" {
				continue
			}
			v, err := strconv.ParseBool(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("invalid value for %q: %w", key, err)
			}
			set := flag.set
			clientOpts = append(clientOpts, func(o *s3.Options) { set(o, v) })
		}
	}
	cfg, err := gcaws.V2ConfigFromURLParams(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	if log != nil {
		cfg.Logger = logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
			log(string(c), strings.TrimSpace(fmt.Sprintf(format, v...)))
		})
	}
	// The upload manager takes the request checksum setting from the options, not the client.
	opts.RequestChecksumCalculation = cfg.RequestChecksumCalculation
	client := s3.NewFromConfig(cfg, clientOpts...)
	exists = func(ctx context.Context) (bool, error) {
		_, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket})
		if err == nil {
			return true, nil
		}
		var nf *types.NotFound
		if errors.As(err, &nf) {
			return false, nil
		}
		return false, err
	}
	b, err = s3blob.OpenBucket(ctx, client, bucket, &opts)
	return b, exists, err
}

// take removes key from q and returns its value.
func take(q url.Values, key string) string {
	v := q.Get(key)
	q.Del(key)
	return v
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, vs := range q {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// sseType is the server-side encryption named by ssetype, matched as S3 spells it, any case.
func sseType(v string) (types.ServerSideEncryption, error) {
	for _, t := range types.ServerSideEncryptionAes256.Values() {
		if strings.EqualFold(string(t), v) {
			return t, nil
		}
	}
	return "", fmt.Errorf("%q is not a valid value for %q", v, "ssetype")
}
