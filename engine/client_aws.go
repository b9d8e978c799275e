package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
)

// AWS_MSK_IAM (Amazon MSK's IAM access control) through franz-go's aws
// package, which signs the SigV4 payload itself: no AWS SDK. The
// credentials are read at each authentication, so rotated ones are
// picked up:
//
//   - awsProfileName="p" in the JAAS line: that profile of the shared
//     credentials file ($AWS_SHARED_CREDENTIALS_FILE, else
//     ~/.aws/credentials): aws_access_key_id, aws_secret_access_key and
//     aws_session_token;
//   - otherwise AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
//     AWS_SESSION_TOKEN, else the profile $AWS_PROFILE or "default".
//
// The region is the broker host name's (b-1.x.kafka.<region>.amazonaws.com),
// else AWS_REGION or AWS_DEFAULT_REGION (franz-go). Not read without the
// SDK: awsRoleArn (an STS AssumeRole), the EC2/ECS instance metadata
// credentials, SSO and credential_process profiles.

// awsCredentialsFileMax bounds the shared credentials file read.
const awsCredentialsFileMax = 1 << 20

var errAWSCredentials = errors.New("engine: no AWS credentials for AWS_MSK_IAM (the environment or the shared credentials file); the node's log says why")

func awsMechanism(profile string, log *slog.Logger) sasl.Mechanism {
	if log == nil {
		log = slog.Default()
	}
	return aws.ManagedStreamingIAM(func(context.Context) (aws.Auth, error) {
		a, err := awsCredentials(profile, os.Getenv)
		if err != nil {
			log.Warn("cannot read AWS credentials for AWS_MSK_IAM", "profile", profile, "error", err)
			return aws.Auth{}, errAWSCredentials
		}
		return a, nil
	})
}

// awsCredentials finds the credentials as the package comment says.
func awsCredentials(profile string, getenv func(string) string) (aws.Auth, error) {
	if profile == "" {
		if key, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"); key != "" && secret != "" {
			return aws.Auth{AccessKey: key, SecretKey: secret, SessionToken: getenv("AWS_SESSION_TOKEN")}, nil
		}
		profile = getenv("AWS_PROFILE")
		if profile == "" {
			profile = "default"
		}
	}
	path := getenv("AWS_SHARED_CREDENTIALS_FILE")
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return aws.Auth{}, err
		}
		path = filepath.Join(home, ".aws", "credentials")
	}
	values, err := readAWSProfile(path, profile)
	if err != nil {
		return aws.Auth{}, err
	}
	a := aws.Auth{AccessKey: values["aws_access_key_id"], SecretKey: values["aws_secret_access_key"], SessionToken: values["aws_session_token"]}
	if a.AccessKey == "" || a.SecretKey == "" {
		return aws.Auth{}, fmt.Errorf("profile %q of %s has no aws_access_key_id and aws_secret_access_key", profile, path)
	}
	return a, nil
}

// readAWSProfile reads the key = value lines of one [profile] section of
// an INI credentials file.
func readAWSProfile(path, profile string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	values := map[string]string{} // bounded by the file's size
	in, found := false, false
	scanner := bufio.NewScanner(&limitedReader{f, awsCredentialsFileMax})
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			in = strings.TrimSpace(line[1:len(line)-1]) == profile
			found = found || in
		case in:
			if key, value, ok := strings.Cut(line, "="); ok {
				values[strings.TrimSpace(key)] = strings.TrimSpace(value)
			}
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("no profile %q in %s", profile, path)
	}
	return values, nil
}

// limitedReader reads at most n bytes, then EOF.
type limitedReader struct {
	f *os.File
	n int64
}

func (r *limitedReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("the file is too long")
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	n, err := r.f.Read(p)
	r.n -= int64(n)
	return n, err
}
